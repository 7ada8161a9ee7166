package streams_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// tableTopology is opsTopology with what the table joins and re-groupings
// read and write.
func tableTopology() *topology.Topology {
	const s, n, c = "google.protobuf.StringValue", "google.protobuf.Int64Value", "fencestream.kit.v1.Change"
	topo := opsTopology()
	for _, tp := range []struct{ name, key, value string }{
		{"l-table", "id", s}, {"r-table", "id", s},
		{"canon", "id", c}, {"canon-table", "id", s},
		{"by-value", "value", c}, {"byval-table", "value", s}, {"byval-out", "value", s},
		{"by-color", "color", c}, {"colors-table", "color", n}, {"color-counts", "color", n},
		{"by-region", "region", c}, {"regions-table", "region", n},
		{"regions-in", "region", s}, {"regioninfo-table", "region", s},
		{"subs", "region", "fencestream.kit.v1.Subscription"}, {"fk-table", "region", "fencestream.kit.v1.Subscribers"},
		{"resps", "id", "fencestream.kit.v1.Response"},
		{"by-count", "count", c}, {"hist-table", "count", n}, {"firsts-table", "count", s},
	} {
		cleanup := topology.CleanupDelete
		if strings.HasSuffix(tp.name, "-table") {
			cleanup = topology.CleanupCompact
		}
		topo.Topics = append(topo.Topics, topology.Topic{Name: tp.name, Key: tp.key, Value: tp.value, Partitions: 4, Cleanup: cleanup})
	}
	return topo
}

func buildTables(t *testing.T, define func(b *streams.Builder)) *streamstest.Driver {
	t.Helper()
	b := streams.New(tableTopology(), "ops", nil)
	define(b)
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return streamstest.New(t, app, time.Unix(1_800_000_000, 0))
}

// latest is the table of each key's latest value read from topic, as Kafka
// Streams' builder.table: an empty value removes the key (the tests'
// tombstone).
func latest(b *streams.Builder, topic, name string) streams.Table[str] {
	return b.Stream[str](topic).GroupByKey().Aggregate(name, func() *str { return nil }, func(_ string, v, _ *str) *str {
		if v.GetValue() == "" {
			return nil
		}
		return v
	})
}

// joinStr is Kafka Streams' MockValueJoiner.TOSTRING_JOINER.
func joinStr(l, r *str) *str {
	side := func(v *str) string {
		if v == nil {
			return "null"
		}
		return v.GetValue()
	}
	return wrapperspb.String(side(l) + "+" + side(r))
}

// Kafka Streams' KTableKTableInnerJoinTest, KTableKTableLeftJoinTest and
// KTableKTableOuterJoinTest (testJoin): their inputs and the joined
// table's stream they expect, a removed row read as an empty value.
func TestTableTableJoin(t *testing.T) {
	keys := func(topic, prefix string, ks ...string) []string {
		var kvs []string
		for _, k := range ks {
			v := prefix + k
			if prefix == "" {
				v = ""
			}
			kvs = append(kvs, k, v)
		}
		return kvs
	}
	steps := []struct {
		topic              string
		kvs                []string
		inner, left, outer []string
	}{
		{"in", keys("in", "X", "0", "1"), nil,
			[]string{"0=X0+null", "1=X1+null"}, []string{"0=X0+null", "1=X1+null"}},
		{"in2", keys("in2", "Y", "0", "1"), []string{"0=X0+Y0", "1=X1+Y1"},
			[]string{"0=X0+Y0", "1=X1+Y1"}, []string{"0=X0+Y0", "1=X1+Y1"}},
		{"in", keys("in", "XX", "0", "1", "2", "3"), []string{"0=XX0+Y0", "1=XX1+Y1"},
			[]string{"0=XX0+Y0", "1=XX1+Y1", "2=XX2+null", "3=XX3+null"}, []string{"0=XX0+Y0", "1=XX1+Y1", "2=XX2+null", "3=XX3+null"}},
		{"in2", keys("in2", "YY", "0", "1", "2", "3"), []string{"0=XX0+YY0", "1=XX1+YY1", "2=XX2+YY2", "3=XX3+YY3"},
			[]string{"0=XX0+YY0", "1=XX1+YY1", "2=XX2+YY2", "3=XX3+YY3"}, []string{"0=XX0+YY0", "1=XX1+YY1", "2=XX2+YY2", "3=XX3+YY3"}},
		{"in", keys("in", "XXX", "0", "1", "2", "3"), []string{"0=XXX0+YY0", "1=XXX1+YY1", "2=XXX2+YY2", "3=XXX3+YY3"},
			[]string{"0=XXX0+YY0", "1=XXX1+YY1", "2=XXX2+YY2", "3=XXX3+YY3"}, []string{"0=XXX0+YY0", "1=XXX1+YY1", "2=XXX2+YY2", "3=XXX3+YY3"}},
		{"in2", keys("in2", "", "0", "1"), []string{"0=", "1="},
			[]string{"0=XXX0+null", "1=XXX1+null"}, []string{"0=XXX0+null", "1=XXX1+null"}},
		{"in", keys("in", "XXXX", "0", "1", "2", "3"), []string{"2=XXXX2+YY2", "3=XXXX3+YY3"},
			[]string{"0=XXXX0+null", "1=XXXX1+null", "2=XXXX2+YY2", "3=XXXX3+YY3"}, []string{"0=XXXX0+null", "1=XXXX1+null", "2=XXXX2+YY2", "3=XXXX3+YY3"}},
		{"in", keys("in", "", "0", "1", "2", "3"), []string{"2=", "3="},
			[]string{"0=", "1=", "2=", "3="}, []string{"0=", "1=", "2=null+YY2", "3=null+YY3"}},
	}
	for _, kind := range []string{"inner", "left", "outer"} {
		t.Run(kind, func(t *testing.T) {
			d := buildTables(t, func(b *streams.Builder) {
				l, r := latest(b, "in", "l"), latest(b, "in2", "r")
				var joined streams.Table[str]
				switch kind {
				case "inner":
					joined = l.Join(r, joinStr)
				case "left":
					joined = l.LeftJoin(r, joinStr)
				default:
					joined = l.OuterJoin(r, joinStr)
				}
				joined.ToStream().To("out")
			})
			for i, st := range steps {
				pipe(t, d, st.topic, st.kvs...)
				exp := map[string][]string{"inner": st.inner, "left": st.left, "outer": st.outer}[kind]
				if got := read(t, d, "out"); strings.Join(got, " ") != strings.Join(exp, " ") {
					t.Fatalf("step %d (%s %q): got %q, want %q", i, st.topic, st.kvs, got, exp)
				}
			}
		})
	}
}

// A join result re-grouped sees each row's old joined value taken out and
// its new one put in: the old values the join passes on are right.
func TestTableJoinOldValues(t *testing.T) {
	var canon streams.Table[str]
	d := buildTables(t, func(b *streams.Builder) {
		l, r := latest(b, "in", "l"), latest(b, "in2", "r")
		canon = l.Join(r, joinStr).
			GroupBy(topology.Boundary{}, "canon", func(k string, _ *str) string { return k }).
			Aggregate("canon", func() *str { return wrapperspb.String("0") }, strAdd, strSub)
	})
	pipe(t, d, "in", "k", "X")
	pipe(t, d, "in2", "k", "Y")
	pipe(t, d, "in", "k", "XX")
	pipe(t, d, "in2", "k", "YY")
	pipe(t, d, "in2", "k", "")
	if got := streamstest.Get(d, canon, "k").GetValue(); got != "0+X+Y-X+Y+XX+Y-XX+Y+XX+YY-XX+YY" {
		t.Fatalf("canon k = %q", got)
	}
}

// Kafka Streams' MockAggregator.TOSTRING_ADDER and TOSTRING_REMOVER.
func strAdd(_ string, v, agg *str) *str {
	return wrapperspb.String(agg.GetValue() + "+" + v.GetValue())
}
func strSub(_ string, v, agg *str) *str {
	return wrapperspb.String(agg.GetValue() + "-" + v.GetValue())
}

// Kafka Streams' KTableAggregateTest.testAggBasic: a table re-grouped by
// its own key, each update one subtraction of the old value and one
// addition of the new.
func TestTableGroupByAggregate(t *testing.T) {
	d := buildTables(t, func(b *streams.Builder) {
		latest(b, "in", "l").
			GroupBy(topology.Boundary{}, "canon", func(k string, _ *str) string { return k }).
			Aggregate("canon", func() *str { return wrapperspb.String("0") }, strAdd, strSub).
			ToStream().To("out")
	})
	pipe(t, d, "in", "A", "1", "B", "2", "A", "3", "B", "4", "C", "5", "D", "6", "B", "7", "C", "8")
	want(t, read(t, d, "out"), "A=0+1", "B=0+2", "A=0+1-1+3", "B=0+2-2+4", "C=0+5", "D=0+6", "B=0+2-2+4-4+7", "C=0+5-5+8")
}

// Kafka Streams' KTableAggregateTest.testAggRepartition: grouped by value,
// a removed row is subtracted, a row that moves is subtracted from its old
// group and added to its new one, and a row with no group key ("") is in
// no group.
func TestTableGroupByRepartition(t *testing.T) {
	d := buildTables(t, func(b *streams.Builder) {
		latest(b, "in", "l").
			GroupBy(byLen, "by-value", func(k string, v *str) string {
				if k == "null" || k == "NULL" {
					return ""
				}
				return v.GetValue()
			}).
			Aggregate("byval", func() *str { return wrapperspb.String("0") }, strAdd, strSub).
			ToStream().To("byval-out")
	})
	pipe(t, d, "in", "A", "1", "A", "", "A", "1", "B", "2", "null", "3", "B", "4", "NULL", "5", "B", "7")
	want(t, read(t, d, "byval-out"), "1=0+1", "1=0+1-1", "1=0+1-1+1", "2=0+2", "2=0+2-2", "4=0+4", "4=0+4-4", "7=0+7")
}

// Kafka Streams' KTableAggregateTest.testCount: a row's move to another
// value counts down where it was and up where it is.
func TestTableGroupByCount(t *testing.T) {
	d := buildTables(t, func(b *streams.Builder) {
		latest(b, "in", "l").
			GroupBy(byLen, "by-color", func(_ string, v *str) string { return v.GetValue() }).
			Count("colors").
			ToStream().To("color-counts")
	})
	pipe(t, d, "in", "A", "green", "B", "green", "A", "blue", "C", "yellow", "D", "green")
	want(t, readNum(t, d, "color-counts"), "green=1", "green=2", "green=1", "blue=1", "yellow=1", "green=2")
}

// Users per region: a user who moves leaves the old region's count.
func TestTableGroupByUsersPerRegion(t *testing.T) {
	var regions streams.Table[num]
	d := buildTables(t, func(b *streams.Builder) {
		regions = latest(b, "in", "l").
			GroupBy(byLen, "by-region", func(_ string, v *str) string { return v.GetValue() }).
			Count("regions")
	})
	pipe(t, d, "in", "alice", "eu", "bob", "eu", "carol", "us")
	pipe(t, d, "in", "bob", "us")
	pipe(t, d, "in", "carol", "")
	for region, n := range map[string]int64{"eu": 1, "us": 1} {
		if got := streamstest.Get(d, regions, region).GetValue(); got != n {
			t.Errorf("users in %s = %d, want %d", region, got, n)
		}
	}
}

// Table joins and re-groupings are refused where they cannot run.
func TestTableOpsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		define func(b *streams.Builder)
		want   string
	}{
		{"join with itself", func(b *streams.Builder) {
			l := latest(b, "in", "l")
			l.Join(l, joinStr).ToStream().To("out")
		}, "joined with itself"},
		{"join of a derived table", func(b *streams.Builder) {
			l, r := latest(b, "in", "l"), latest(b, "in2", "r")
			l.Filter(func(string, *str) bool { return true }).Join(r, joinStr).ToStream().To("out")
		}, "materialized"},
		{"GroupBy to a topic of another type", func(b *streams.Builder) {
			latest(b, "in", "l").GroupBy(byLen, "by-len", func(k string, _ *str) string { return k }).Count("lens")
		}, "by-len"},
		{"JoinFK through an undeclared topic", func(b *streams.Builder) {
			users, regions := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
			users.JoinFK(regions, func(u *str) string { return u.GetValue() }, joinStr, "fk", "nowhere", "resps", toRegion, toUser)
		}, "nowhere"},
		{"GroupBy of a foreign-key join", func(b *streams.Builder) {
			users, regions := latest(b, "in", "l"), latest(b, "regions-in", "regioninfo")
			users.JoinFK(regions, func(u *str) string { return u.GetValue() }, joinStr, "fk", "subs", "resps", toRegion, toUser).
				GroupBy(byLen, "by-color", func(_ string, v *str) string { return v.GetValue() }).Count("colors")
		}, "no old values"},
		{"GroupBy with no boundary", func(b *streams.Builder) {
			latest(b, "in", "l").GroupBy(topology.Boundary{}, "by-color", func(_ string, v *str) string { return v.GetValue() }).Count("colors")
		}, "no boundary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.New(tableTopology(), "ops", nil)
			tc.define(b)
			if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A table join: each side's update reads the other table for its key, in
// its own group; a removed row removes the joined one (a tombstone).
func Example_tableJoin() {
	runTables(func(b *streams.Builder) {
		users, regions := latest(b, "in", "l"), latest(b, "in2", "r")
		users.LeftJoin(regions, func(u, r *str) *str {
			return wrapperspb.String(fmt.Sprintf("%s in %s", u.GetValue(), r.GetValue()))
		}).ToStream().To("out")
	}, func(d *streamstest.Driver) {
		streamstest.InputTopic[str](d, "in").Pipe("u1", wrapperspb.String("alice"))
		streamstest.InputTopic[str](d, "in2").Pipe("u1", wrapperspb.String("eu"))
		streamstest.InputTopic[str](d, "in").Pipe("u1", wrapperspb.String(""))
		for _, r := range streamstest.OutputTopic[str](d, "out").Read() {
			fmt.Printf("%s %q tombstone=%v\n", r.Key, r.Value.GetValue(), r.Value == nil)
		}
	})
	// Output:
	// u1 "alice in " tombstone=false
	// u1 "alice in eu" tombstone=false
	// u1 "" tombstone=true
}

// A table re-grouped: a row that changes group is subtracted from the old
// group and added to the new one, through a declared topic.
func Example_tableGroupBy() {
	var regions streams.Table[num]
	runTables(func(b *streams.Builder) {
		regions = latest(b, "in", "l").
			GroupBy(byLen, "by-region", func(_ string, region *str) string { return region.GetValue() }).
			Count("regions")
	}, func(d *streamstest.Driver) {
		users := streamstest.InputTopic[str](d, "in")
		users.Pipe("alice", wrapperspb.String("eu"))
		users.Pipe("bob", wrapperspb.String("eu"))
		fmt.Println("eu:", streamstest.Get(d, regions, "eu").GetValue(), "us:", streamstest.Get(d, regions, "us").GetValue())
		users.Pipe("bob", wrapperspb.String("us"))
		fmt.Println("eu:", streamstest.Get(d, regions, "eu").GetValue(), "us:", streamstest.Get(d, regions, "us").GetValue())
	})
	// Output:
	// eu: 2 us: 0
	// eu: 1 us: 1
}

func runTables(define func(b *streams.Builder), drive func(d *streamstest.Driver)) {
	b := streams.New(tableTopology(), "ops", nil)
	define(b)
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	drive(streamstest.New(t, app, time.Unix(1_800_000_000, 0)))
}

// A count re-grouped by its value (how many keys have each count): the
// count's adder changes its value in place, so the old value the re-key
// subtracts must be the one kept before the update.
func TestTableGroupByOfACount(t *testing.T) {
	var hist streams.Table[num]
	d := buildTables(t, func(b *streams.Builder) {
		hist = b.Stream[str]("in").GroupByKey().Count("agg").
			GroupBy(byLen, "by-count", func(_ string, n *num) string { return fmt.Sprint(n.GetValue()) }).
			Count("hist")
	})
	pipe(t, d, "in", "a", "x", "b", "x", "a", "x", "c", "x", "a", "x")
	// a: 3, b: 1, c: 1
	for count, n := range map[string]int64{"1": 2, "2": 0, "3": 1} {
		if got := streamstest.Get(d, hist, count).GetValue(); got != n {
			t.Errorf("keys counted %s times = %d, want %d", count, got, n)
		}
	}
}

// Reduce of a re-grouped table: add folds a row in, sub takes it out, and a
// sub that returns nil removes the group.
func TestTableGroupByReduce(t *testing.T) {
	var firsts streams.Table[str]
	d := buildTables(t, func(b *streams.Builder) {
		firsts = latest(b, "in", "l").
			GroupBy(byLen, "by-count", func(_ string, v *str) string { return v.GetValue()[:1] }).
			Reduce("firsts", func(agg, v *str) *str { return wrapperspb.String(agg.GetValue() + v.GetValue()) },
				func(agg, v *str) *str {
					rest := strings.Replace(agg.GetValue(), v.GetValue(), "", 1)
					if rest == "" {
						return nil
					}
					return wrapperspb.String(rest)
				})
	})
	pipe(t, d, "in", "k1", "ab", "k2", "ac", "k3", "bd")
	pipe(t, d, "in", "k1", "be")
	pipe(t, d, "in", "k2", "")
	if got := streamstest.Get(d, firsts, "b").GetValue(); got != "bdbe" {
		t.Errorf("b = %q, want bdbe", got)
	}
	if got := streamstest.Get(d, firsts, "a"); got != nil {
		t.Errorf("a = %v, want none: both its rows left", got)
	}
}
