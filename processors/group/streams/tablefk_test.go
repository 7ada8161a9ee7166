package streams_test

import (
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/group/streams"
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
				{"in", []string{"bob", "us"}, "bob=", "bob=us+null"},
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
