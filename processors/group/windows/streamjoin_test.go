package windows_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

const topicRight = "gt-in-right"

// joinTopology is the timer topology with a second, co-partitioned stream.
func joinStreamsTopology() *topology.Topology {
	topo := timerTopology(1)
	topo.Topics = append(topo.Topics, topology.Topic{Name: topicRight, Key: "device_id", Value: "fencestream.kit.test.v1.Ping", Partitions: 1, Cleanup: topology.CleanupDelete})
	p := &topo.Processors[0]
	p.Streams = append(p.Streams, topicRight)
	p.Flows = append(p.Flows, topology.Flow{From: topicRight, To: topicTab}, topology.Flow{From: topicRight, To: topicOut}, topology.Flow{From: topicRight, To: topology.TopicDeadLetter})
	return topo
}

type joinRec struct {
	right bool
	key   string
	at    int64
}

// runStreamJoin joins pings of gt-in (left) and gt-in-right by key, each pair
// emitted as "L@t|R@t" ("-" for a missing side); it returns the pairs per
// key and the late records.
func runStreamJoin(t *testing.T, spec windows.JoinSpec, recs []joinRec, eager bool) (map[string][]string, []string) {
	t.Helper()
	krecs := make([]kjRec, len(recs))
	for i, r := range recs {
		krecs[i] = kjRec{r.right, r.key, r.key, r.at}
	}
	return joinWith(t, spec, krecs, eager, func(l, r *testpb.Ping) string {
		ls, rs := "-", "-"
		if l != nil {
			ls = fmt.Sprint("L@", l.GetDeviceTimeMs())
		}
		if r != nil {
			rs = fmt.Sprint("R@", r.GetDeviceTimeMs())
		}
		return ls + "|" + rs
	})
}

// Kafka Streams' JoinWindows semantics: records join when their times
// differ by at most the window (inclusive); a left (outer) join hands over
// an unmatched record once its window closed; grace admits out-of-order
// records, and later ones are late.
func TestStreamJoin(t *testing.T) {
	const L, R = false, true
	flush := joinRec{L, "zz", 1000} // closes every window but its own
	asym := windows.JoinWindows(0, 10*time.Millisecond, windows.OuterJoin).WithBefore(-5 * time.Millisecond).WithAfter(10 * time.Millisecond)
	for _, tc := range []struct {
		name string
		kind windows.JoinKind
		spec *windows.JoinSpec
		recs []joinRec
		want map[string][]string
		late []string
	}{
		{name: "inner: within the difference, either order, inclusive", kind: windows.InnerJoin,
			recs: []joinRec{{L, "a", 100}, {R, "a", 95}, {R, "a", 110}, {R, "a", 111}, {L, "a", 120}, flush},
			want: map[string][]string{"a": {"L@100|R@95", "L@100|R@110", "L@120|R@110", "L@120|R@111"}}},
		{name: "left: an unmatched left record once its window closed", kind: windows.LeftJoin,
			recs: []joinRec{{L, "a", 100}, {L, "a", 130}, {R, "a", 125}, {R, "a", 160}, flush},
			want: map[string][]string{"a": {"L@100|-", "L@130|R@125"}}},
		{name: "outer: unmatched records of both sides, in time order", kind: windows.OuterJoin,
			recs: []joinRec{{R, "a", 50}, {L, "a", 100}, {R, "a", 200}, flush},
			want: map[string][]string{"a": {"-|R@50", "L@100|-", "-|R@200"}}},
		{name: "late: the partition's stream time closed the record's window, and nothing held joins it", kind: windows.InnerJoin,
			recs: []joinRec{{L, "a", 100}, {L, "b", 200}, {R, "a", 105}, flush},
			late: []string{"a@105"}},
		// Kafka Streams' window store keeps a record for the window size plus
		// grace (before + after + grace), so a record within grace joins one
		// whose window closed (and was handed over unmatched).
		{name: "a record handed over unmatched still joins until before+after+grace", kind: windows.LeftJoin,
			recs: []joinRec{{L, "a", 100}, {L, "b", 116}, {R, "a", 110}, flush},
			want: map[string][]string{"a": {"L@100|-", "L@100|R@110"}, "b": {"L@116|-"}}},
		// KAFKA-16123: Kafka Streams' processor joins a record whose window
		// closed with what its window store still holds, and does not store it.
		{name: "late: a late record joins what is still held, and is not held", kind: windows.LeftJoin,
			recs: []joinRec{{L, "a", 100}, {L, "b", 121}, {R, "a", 105}, {L, "a", 110}, flush},
			want: map[string][]string{"a": {"L@100|-", "L@100|R@105", "L@110|-"}, "b": {"L@121|-"}},
			late: []string{"a@105"}},
		{name: "late: an unmatched late record is handed over at once", kind: windows.OuterJoin,
			recs: []joinRec{{L, "b", 200}, {R, "a", 105}, flush},
			want: map[string][]string{"a": {"-|R@105"}, "b": {"L@200|-"}},
			late: []string{"a@105"}},
		// Kafka Streams orders its outer-join store by (time, side, key), the
		// right side first.
		{name: "outer, asymmetric: unmatched records of one time, right before left", spec: &asym,
			recs: []joinRec{{L, "a", 100}, {R, "a", 100}, flush},
			want: map[string][]string{"a": {"-|R@100", "L@100|-"}}},
	} {
		for _, eager := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/eager=%v", tc.name, eager), func(t *testing.T) {
				spec := windows.JoinWindows(10*time.Millisecond, 5*time.Millisecond, tc.kind)
				if tc.spec != nil {
					spec = *tc.spec
				}
				got, late := runStreamJoin(t, spec, tc.recs, eager)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("pairs\n %v\nwant\n %v", got, tc.want)
				}
				if strings.Join(late, ",") != strings.Join(tc.late, ",") {
					t.Errorf("late %v, want %v", late, tc.late)
				}
			})
		}
	}
}

// A join's windows are Kafka Streams': before plus after may not be negative
// (either alone may), nor the grace.
func TestStreamJoinSpecRefused(t *testing.T) {
	for _, tc := range []struct {
		spec windows.JoinSpec
		want string
	}{
		{windows.JoinWindows(10*time.Millisecond, 0, windows.InnerJoin).WithBefore(-20 * time.Millisecond), "before -20ms plus after 10ms must not be negative"},
		{windows.JoinWindows(10*time.Millisecond, -time.Millisecond, windows.InnerJoin), "grace -1ms must not be negative"},
		{windows.JoinSpec{Kind: 7}, "unknown join kind 7"},
	} {
		g := group.New[kitpb.JoinBuffer](tableOf(joinStreamsTopology(), "fencestream.kit.v1.JoinBuffer"), testGroup, quiet)
		windows.NewStreamJoin(g, "j", tc.spec, func(jb *kitpb.JoinBuffer) *kitpb.JoinBuffer { return jb },
			func(*group.Context[kitpb.JoinBuffer, *kitpb.JoinBuffer], *kitpb.JoinBuffer, *testpb.Ping, *testpb.Ping) error {
				return nil
			})
		_, err := g.Graph()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.spec, err, tc.want)
		}
	}
}
