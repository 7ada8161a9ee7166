package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

var (
	toRegion = topology.Boundary{Preserved: "the order of one user's updates", Lost: "order between users", Lag: "one hop"}
	toUser   = topology.Boundary{Preserved: "the order of one region's answers", Lost: "order between regions", Lag: "one hop"}
)

// A foreign-key join: users (key id, value the region's key) joined with
// regions (key region) through declared subscription and response topics.
func TestTableJoinFK(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(map[bool]string{false: "inner", true: "left"}[left], func(t *testing.T) {
			d := buildTables(t, func(b *streams.Builder) {
				users, regions := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
				region := func(u *str) string { return u.GetValue() }
				var joined streams.Table[str]
				if left {
					joined = users.LeftJoinFK(regions, region, joinStr, "fk", "subs", "resps", toRegion, toUser)
				} else {
					joined = users.JoinFK(regions, region, joinStr, "fk", "subs", "resps", toRegion, toUser)
				}
				joined.ToStream().To("out")
			})
			steps := []struct {
				topic        string
				kvs          []string
				inner, outer string // outer: the left join's
			}{
				{"regions-in", []string{"eu", "Europe"}, "", ""},
				{"in", []string{"alice", "eu"}, "alice=eu+Europe", "alice=eu+Europe"},
				{"in", []string{"bob", "us"}, "", "bob=us+null"}, // a new row waits for its region
				{"regions-in", []string{"us", "USA"}, "bob=us+USA", "bob=us+USA"},
				{"regions-in", []string{"eu", "EU"}, "alice=eu+EU", "alice=eu+EU"},
				{"in", []string{"alice", "us"}, "alice=us+USA", "alice=us+USA"},
				{"regions-in", []string{"eu", "Europa"}, "", ""}, // nobody refers to eu any more
				{"in", []string{"bob", ""}, "bob=", "bob="},
				{"regions-in", []string{"us", ""}, "alice=", "alice=us+null"},
			}
			for i, st := range steps {
				pipe(t, d, st.topic, st.kvs...)
				exp := st.inner
				if left {
					exp = st.outer
				}
				if got := strings.Join(read(t, d, "out"), " "); got != exp {
					t.Fatalf("step %d (%s %q): got %q, want %q", i, st.topic, st.kvs, got, exp)
				}
			}
		})
	}
}

// JoinFK's groups, topics and boundaries, as Describe shows them.
func TestTableJoinFKDescribed(t *testing.T) {
	b := streams.New(tableTopology(), "ops", nil)
	users, regions := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
	users.JoinFK(regions, func(u *str) string { return u.GetValue() }, joinStr, "fk", "subs", "resps", toRegion, toUser).ToStream().To("out")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := app.Describe()
	for _, w := range []string{
		"Group l: reads in; writes subs",
		"Group fk: reads subs; writes resps; table fk-table",
		"Group regioninfo: reads regions-in; writes resps",
		"Group ops: reads resps; writes out",
		"in -> subs (key id -> region), in group l",
		"subs -> resps (key region -> id), in group fk",
		"regions-in -> resps (key region -> id), in group regioninfo",
	} {
		if !strings.Contains(d, w) {
			t.Errorf("describe does not say %q:\n%s", w, d)
		}
	}
}

// A foreign-key join: each user's row is joined with the row of the region
// it names; a region's change reaches every user in it.
func Example_tableJoinFK() {
	runTables(func(b *streams.Builder) {
		users, regions := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
		users.JoinFK(regions, func(u *str) string { return u.GetValue() }, joinStr, "fk", "subs", "resps", toRegion, toUser).
			ToStream().To("out")
	}, func(d *streamstest.Driver) {
		streamstest.InputTopic[str](d, "regions-in").Pipe("eu", wrapperspb.String("Europe"))
		streamstest.InputTopic[str](d, "in").Pipe("alice", wrapperspb.String("eu"))
		streamstest.InputTopic[str](d, "in").Pipe("bob", wrapperspb.String("eu"))
		streamstest.InputTopic[str](d, "regions-in").Pipe("eu", wrapperspb.String("EU"))
		for _, r := range streamstest.OutputTopic[str](d, "out").Read() {
			fmt.Println(r.Key, r.Value.GetValue())
		}
	})
	// Output:
	// alice eu+Europe
	// bob eu+Europe
	// alice eu+EU
	// bob eu+EU
}

// Kafka Streams' KTableKTableForeignKeyJoinIntegrationTest
// (doJoinFromLeftThenDeleteLeftEntity, doJoinFromRightThenDeleteRightEntity,
// shouldEmitTombstoneWhenDeletingNonJoiningRecords): left values
// "lhsValueN|rhsN" name their foreign key after the bar; each step's output
// read as Kafka Streams reads it, the last value per key ("<nil>" for a
// tombstone).
func TestTableJoinFKKafkaStreams(t *testing.T) {
	type step struct {
		topic        string // "in": the left table, "regions-in": the right
		kvs          []string
		inner, outer map[string]string // outer: the left join's
	}
	both := func(m map[string]string) (map[string]string, map[string]string) { return m, m }
	leftThenDeleteLeft := []step{
		{"regions-in", []string{"rhs1", "rhsValue1", "rhs2", "rhsValue2", "rhs3", "rhsValue3"}, nil, nil},
		{"in", []string{"lhs1", "lhsValue1|rhs1", "lhs2", "lhsValue2|rhs2"}, nil, nil},
		{"in", []string{"lhs3", "lhsValue3|rhs1"}, nil, nil},
		{"in", []string{"lhs1", ""}, nil, nil},
	}
	leftThenDeleteLeft[1].inner, leftThenDeleteLeft[1].outer = both(map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"})
	leftThenDeleteLeft[2].inner, leftThenDeleteLeft[2].outer = both(map[string]string{"lhs3": "(lhsValue3|rhs1,rhsValue1)"})
	leftThenDeleteLeft[3].inner, leftThenDeleteLeft[3].outer = both(map[string]string{"lhs1": "<nil>"})
	rightThenDeleteRight := []step{
		{"in", []string{"lhs1", "lhsValue1|rhs1", "lhs2", "lhsValue2|rhs2", "lhs3", "lhsValue3|rhs1"}, nil,
			map[string]string{"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}},
		{"regions-in", []string{"rhs1", "rhsValue1"}, nil, nil},
		{"regions-in", []string{"rhs2", "rhsValue2"}, nil, nil},
		{"regions-in", []string{"rhs3", "rhsValue3"}, nil, nil},
		{"regions-in", []string{"rhs1", ""}, map[string]string{"lhs1": "<nil>", "lhs3": "<nil>"},
			map[string]string{"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}},
	}
	rightThenDeleteRight[1].inner, rightThenDeleteRight[1].outer = both(map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
	rightThenDeleteRight[2].inner, rightThenDeleteRight[2].outer = both(map[string]string{"lhs2": "(lhsValue2|rhs2,rhsValue2)"})
	nonJoining := []step{
		{"in", []string{"lhs1", "lhsValue1|rhs1"}, nil, map[string]string{"lhs1": "(lhsValue1|rhs1,null)"}},
		{"in", []string{"lhs1", ""}, map[string]string{"lhs1": "<nil>"}, map[string]string{"lhs1": "<nil>"}},
		{"in", []string{"lhs1", ""}, nil, nil},
	}
	joiner := func(l, r *str) *str {
		rv := "null"
		if r != nil {
			rv = r.GetValue()
		}
		return wrapperspb.String("(" + l.GetValue() + "," + rv + ")")
	}
	for name, steps := range map[string][]step{"doJoinFromLeftThenDeleteLeftEntity": leftThenDeleteLeft, "doJoinFromRightThenDeleteRightEntity": rightThenDeleteRight, "shouldEmitTombstoneWhenDeletingNonJoiningRecords": nonJoining} {
		for _, left := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/leftJoin=%v", name, left), func(t *testing.T) {
				d := buildTables(t, func(b *streams.Builder) {
					lhs, rhs := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
					fk := func(v *str) string { _, k, _ := strings.Cut(v.GetValue(), "|"); return k }
					if left {
						lhs.LeftJoinFK(rhs, fk, joiner, "fk", "subs", "resps", toRegion, toUser).ToStream().To("out")
					} else {
						lhs.JoinFK(rhs, fk, joiner, "fk", "subs", "resps", toRegion, toUser).ToStream().To("out")
					}
				})
				for i, st := range steps {
					pipe(t, d, st.topic, st.kvs...)
					got := map[string]string{}
					for _, r := range streamstest.OutputTopic[str](d, "out").Read() {
						got[r.Key] = "<nil>"
						if r.Value != nil {
							got[r.Key] = r.Value.GetValue()
						}
					}
					exp := st.inner
					if left {
						exp = st.outer
					}
					if fmt.Sprint(got) != fmt.Sprint(exp) && len(got)+len(exp) > 0 {
						t.Fatalf("step %d (%s %q): got %v, want %v", i, st.topic, st.kvs, got, exp)
					}
				}
			})
		}
	}
}
