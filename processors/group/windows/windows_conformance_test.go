package windows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Kafka Streams' documented window semantics, transcribed: inputs with event
// times in milliseconds since the epoch, in partition order, one partition,
// and the results each window hands over. Rules (Javadoc of Windows,
// TimeWindows, SessionWindows; KIP-328 suppression, KIP-825 emit strategy):
//   - a window [start, end) takes records until stream_time >= end + grace;
//     later records are late: dropped and counted;
//   - stream time is the partition's highest event time, whatever the key;
//   - hopping window starts are multiples of the advance, never negative;
//   - under final results nothing is emitted before end + grace, and each
//     window exactly once; under updates every change is emitted;
//   - a session takes records within the inactivity gap of its ends, merges
//     sessions a record bridges, and closes when stream time passes end + gap
//     + grace.
// Each case runs twice: timers looked at after every record, and only once at
// the end. Both must give the same results (the finding 2).

type rec struct {
	key string
	at  int64
	val float64
}

// aggregate adds a record at event time at to a key's windows; the kinds of
// windows under test provide one.
type aggregate func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error

// handOver is what a window kind calls with each result it hands over.
type handOver func(c *wsCtx, start, end time.Time, count int64, sum float64)

type conformance struct {
	tt   *tester.Tester
	proc *group.Processor
	out  *tester.QueueTracker
	mu   sync.Mutex
	late []string
}

// newConformance runs a group keeping one window set per key (the whole
// state); build registers the window kind and returns its Add. Results are
// emitted as Triggers: Hlc the count, Lat the sum, EventTimeMs the start,
// FenceId the end (reused fields; any would do).
func newConformance(t *testing.T, build func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate) *conformance {
	t.Helper()
	h := &conformance{tt: tester.New(t)}
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	add := build(g, func(c *wsCtx, start, end time.Time, count int64, sum float64) {
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), Hlc: uint64(count), Lat: sum, EventTimeMs: start.UnixMilli(), FenceId: fmt.Sprint(end.UnixMilli())})
	})
	group.Stream(g, topicIn, func(c *wsCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		err := add(c, st, c.EventTime(), p.GetLat())
		if errors.Is(err, windows.ErrLate) {
			h.mu.Lock()
			h.late = append(h.late, fmt.Sprintf("%s@%d", c.Key(), p.GetDeviceTimeMs()))
			h.mu.Unlock()
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	wall := time.UnixMilli(base) // far after the inputs: stream time comes from the data
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(h.tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	h.proc = proc
	runUntilCleanup(t, proc.Run)
	h.out = h.tt.NewQueueTracker(topicOut)
	return h
}

// run consumes the records, looking for due timers after each if eager, and
// once at the end; it returns what was handed over, per key in order, as
// "key [start,end) n=count sum=sum", and the late records.
func (h *conformance) run(t *testing.T, recs []rec, eager bool) (map[string][]string, []string) {
	t.Helper()
	for _, r := range recs {
		h.tt.Consume(topicIn, r.key, &testpb.Ping{DeviceId: r.key, Lat: r.val, DeviceTimeMs: r.at})
		if eager {
			fireTimers(t, h.tt, h.proc)
		}
	}
	fireTimers(t, h.tt, h.proc)
	got := map[string][]string{}
	for {
		k, v, ok := h.out.Next()
		if !ok {
			break
		}
		tr := v.(*testpb.Trigger)
		got[k] = append(got[k], fmt.Sprintf("[%d,%s) n=%d sum=%g", tr.GetEventTimeMs(), tr.GetFenceId(), int64(tr.GetHlc()), tr.GetLat()))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return got, slices.Clone(h.late)
}

// fixedWindows is the aggregate of NewWindows with spec.
func fixedWindows(spec windows.WindowSpec) func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
		w := windows.NewWindows(g, "w", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				emit(c, win.Start, win.End, win.Count, win.Sum)
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return w.Add(c, st, at, value, nil)
		}
	}
}

type conformanceCase struct {
	name string
	recs []rec
	// want: per key, the results handed over in order; late: the late
	// records as key@time, in arrival order.
	want map[string][]string
	late []string
}

func runConformance(t *testing.T, build func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate, cases []conformanceCase) {
	for _, tc := range cases {
		for _, eager := range []bool{true, false} {
			mode := "timers only at the end"
			if eager {
				mode = "timers after every record"
			}
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				got, late := newConformance(t, build).run(t, tc.recs, eager)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("handed over\n %v\nwant\n %v", got, tc.want)
				}
				if strings.Join(late, ",") != strings.Join(tc.late, ",") {
					t.Errorf("late %v, want %v", late, tc.late)
				}
			})
		}
	}
}

const sec = int64(1000)

func TestConformanceTumbling(t *testing.T) {
	runConformance(t, fixedWindows(windows.Tumbling(10*time.Millisecond, 0)), []conformanceCase{
		{name: "ends are exclusive; a window closes when stream time reaches its end",
			recs: []rec{{"a", 1, 1}, {"a", 9, 2}, {"a", 10, 4}},
			want: map[string][]string{"a": {"[0,10) n=2 sum=3"}}},
		{name: "nothing before end plus grace",
			recs: []rec{{"a", 1, 1}, {"a", 9, 2}}},
		{name: "zero grace: a record for a closed window is late",
			recs: []rec{{"a", 1, 1}, {"a", 10, 2}, {"a", 9, 4}, {"a", 20, 8}},
			want: map[string][]string{"a": {"[0,10) n=1 sum=1", "[10,20) n=1 sum=2"}},
			late: []string{"a@9"}},
	})
	runConformance(t, fixedWindows(windows.Tumbling(10*time.Millisecond, 5*time.Millisecond)), []conformanceCase{
		{name: "grace: out of order within it counts, at end plus grace it is late",
			recs: []rec{{"a", 2, 1}, {"a", 12, 2}, {"a", 8, 4}, {"a", 14, 8}, {"a", 9, 16}, {"a", 15, 32}, {"a", 9, 64}},
			want: map[string][]string{"a": {"[0,10) n=3 sum=21"}},
			late: []string{"a@9"}},
		{name: "stream time is the partition's: another key's record closes the window",
			recs: []rec{{"a", 2, 1}, {"b", 15, 2}, {"a", 8, 4}, {"b", 30, 8}},
			want: map[string][]string{"a": {"[0,10) n=1 sum=1"}, "b": {"[10,20) n=1 sum=2"}},
			late: []string{"a@8"}},
		{name: "a key with no window there: its record is late all the same",
			recs: []rec{{"b", 15, 2}, {"a", 8, 4}},
			late: []string{"a@8"}},
	})
	// The example: tumbling 30 s, grace 60 s; key 1 at 10,009 ms
	// arrives when another key has moved the partition's stream time to
	// 90,000 ms, its window's end plus grace.
	runConformance(t, fixedWindows(windows.Tumbling(30*time.Second, 60*time.Second)), []conformanceCase{
		{name: "issue 19 example",
			recs: []rec{{"1", 5 * sec, 1}, {"2", 90 * sec, 1}, {"1", 10009, 1}, {"2", 200 * sec, 1}},
			want: map[string][]string{"1": {"[0,30000) n=1 sum=1"}, "2": {"[90000,120000) n=1 sum=1"}},
			late: []string{"1@10009"}},
	})
}

func TestConformanceHopping(t *testing.T) {
	runConformance(t, fixedWindows(windows.Hopping(10*time.Millisecond, 5*time.Millisecond, 0)), []conformanceCase{
		{name: "no window starts before the epoch",
			recs: []rec{{"a", 0, 1}, {"a", 30, 0}},
			want: map[string][]string{"a": {"[0,10) n=1 sum=1"}}},
		{name: "each record in size/advance windows",
			recs: []rec{{"a", 3, 1}, {"a", 7, 2}, {"a", 12, 4}, {"a", 40, 0}},
			want: map[string][]string{"a": {"[0,10) n=2 sum=3", "[5,15) n=2 sum=6", "[10,20) n=1 sum=4"}}},
		{name: "a record late for one window counts in the next",
			recs: []rec{{"a", 3, 1}, {"a", 11, 2}, {"a", 6, 4}, {"a", 40, 0}},
			want: map[string][]string{"a": {"[0,10) n=1 sum=1", "[5,15) n=2 sum=6", "[10,20) n=1 sum=2"}}},
	})
}

func TestWindowEmitUpdates(t *testing.T) {
	runConformance(t, fixedWindows(windows.Tumbling(10*time.Millisecond, 5*time.Millisecond).Emitting(windows.EmitUpdates)), []conformanceCase{
		{name: "every change, the last equal to the final; late records change nothing",
			recs: []rec{{"a", 2, 1}, {"a", 12, 2}, {"a", 8, 4}, {"a", 15, 8}, {"a", 9, 16}},
			want: map[string][]string{"a": {"[0,10) n=1 sum=1", "[10,20) n=1 sum=2", "[0,10) n=2 sum=5", "[10,20) n=2 sum=10"}},
			late: []string{"a@9"}},
	})
}

// sessionWindows is the aggregate of NewSessions with spec; a Removed session
// (EmitUpdates) is handed over with count -1.
func sessionWindows(spec windows.SessionSpec) func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
		s := windows.NewSessions(g, "s", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
			func(into, from *testpb.Ping) { into.Lon = max(into.Lon, from.Lon) },
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				n := win.Count
				if win.Removed {
					n = -1
				}
				emit(c, win.Start, win.End, n, win.Sum)
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return s.Add(c, st, at, value, func(agg *testpb.Ping) { agg.Lon = max(agg.Lon, value) })
		}
	}
}

// Sessions print as [start,end) but are [start, end], end the last record.
func TestConformanceSessions(t *testing.T) {
	// SessionWindows' Javadoc example, gap 5: 10, 12 and 20 are two
	// sessions; 16 merges them into one of all four values. Grace 10 keeps
	// [10,12] open when 20 arrives.
	runConformance(t, sessionWindows(windows.SessionWindows(5*time.Millisecond, 10*time.Millisecond)), []conformanceCase{
		{name: "Javadoc example: a bridging record merges two sessions",
			recs: []rec{{"A", 10, 1}, {"A", 12, 2}, {"A", 20, 3}, {"A", 16, 4}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,20) n=4 sum=10"}}},
		{name: "without the bridge, two sessions",
			recs: []rec{{"A", 10, 1}, {"A", 12, 2}, {"A", 20, 3}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,12) n=2 sum=3", "[20,20) n=1 sum=3"}}},
	})
	runConformance(t, sessionWindows(windows.SessionWindows(5*time.Millisecond, 0)), []conformanceCase{
		{name: "the gap is inclusive",
			recs: []rec{{"A", 10, 1}, {"A", 15, 2}, {"A", 21, 4}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,15) n=2 sum=3", "[21,21) n=1 sum=4"}}},
		{name: "a session closes once stream time is past end + gap + grace",
			recs: []rec{{"A", 10, 1}, {"B", 15, 0}, {"A", 14, 2}, {"B", 20, 0}, {"A", 12, 4}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,14) n=2 sum=3"}, "B": {"[15,20) n=2 sum=0"}},
			late: []string{"A@12"}},
		{name: "another key's records close the session: a record within its gap is late",
			recs: []rec{{"A", 10, 1}, {"B", 30, 0}, {"A", 12, 2}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,10) n=1 sum=1"}, "B": {"[30,30) n=1 sum=0"}},
			late: []string{"A@12"}},
		{name: "a closed session is final: a record in its gap after the close starts a new one",
			recs: []rec{{"A", 10, 1}, {"B", 16, 0}, {"A", 15, 2}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,10) n=1 sum=1", "[15,15) n=1 sum=2"}, "B": {"[16,16) n=1 sum=0"}}},
	})
	// With Retention a closed session stays mergeable (Kafka Streams' session
	// store retention): the record at 15 is not late (its merged session
	// [10,15] is open at stream time 16), so it re-opens [10,10], handed over
	// already, and the merged session is handed over again when it closes.
	runConformance(t, sessionWindows(windows.SessionWindows(5*time.Millisecond, 0).Retain(10*time.Millisecond)), []conformanceCase{
		{name: "retained: a closed session re-opens and is handed over again",
			recs: []rec{{"A", 10, 1}, {"B", 16, 0}, {"A", 15, 2}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,10) n=1 sum=1", "[10,15) n=2 sum=3"}, "B": {"[16,16) n=1 sum=0"}}},
		{name: "retained: a record reaching only closed sessions is late",
			recs: []rec{{"A", 10, 1}, {"B", 16, 0}, {"A", 9, 2}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,10) n=1 sum=1"}, "B": {"[16,16) n=1 sum=0"}},
			late: []string{"A@9"}},
	})
	runConformance(t, sessionWindows(windows.SessionWindows(5*time.Millisecond, 10*time.Millisecond).Emitting(windows.EmitUpdates)), []conformanceCase{
		// Every absorbed session is removed, [10,10] too though the merged
		// session keeps its start (KStreamSessionWindowAggregateProcessorTest
		// shouldImmediatelyForwardRemovedSessionsWhenMerging).
		{name: "updates: every change, the absorbed sessions removed",
			recs: []rec{{"A", 10, 1}, {"A", 12, 2}, {"A", 20, 3}, {"A", 16, 4}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,10) n=1 sum=1", "[10,10) n=-1 sum=1", "[10,12) n=2 sum=3", "[20,20) n=1 sum=3", "[10,12) n=-1 sum=3", "[20,20) n=-1 sum=3", "[10,20) n=4 sum=10"}, "B": {"[100,100) n=1 sum=0"}}},
	})
}

// slidingWindows is the aggregate of NewSliding with spec.
func slidingWindows(spec windows.SlidingSpec) func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit handOver) aggregate {
		s := windows.NewSliding(g, "sl", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
			func(acc, rec *testpb.Ping) { acc.Lon = max(acc.Lon, rec.Lon) },
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				emit(c, win.Start, win.End, win.Count, win.Sum)
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return s.Add(c, st, at, value, &testpb.Ping{Lon: value})
		}
	}
}

// Sliding windows print as [start,end) but are [start, end].
func TestConformanceSliding(t *testing.T) {
	// SlidingWindows' Javadoc example: time difference 5000 ms, records at
	// 8000, 9200 and 12400 give exactly five windows.
	javadoc := []rec{{"A", 8000, 1}, {"A", 9200, 2}, {"A", 12400, 3}, {"B", 100 * sec, 0}}
	runConformance(t, slidingWindows(windows.SlidingWindows(5*time.Second, 0)), []conformanceCase{
		{name: "Javadoc example",
			recs: javadoc,
			want: map[string][]string{"A": {"[3000,8000) n=1 sum=1", "[4200,9200) n=2 sum=3", "[7400,12400) n=3 sum=6", "[8001,13001) n=2 sum=5", "[9201,14201) n=1 sum=3"}}},
	})
	runConformance(t, slidingWindows(windows.SlidingWindows(10*time.Millisecond, 0)), []conformanceCase{
		{name: "closed when stream time is past end + grace; late once t + difference is before stream time - grace",
			// A@39 is not late (39+10 is not before 40), but its own window
			// [29,39] is closed and no open window holds it: as in Kafka
			// Streams it changes nothing, and nothing of it is kept, so A@40
			// finds no record before it ([30,40] holds only itself) and
			// starts no right window.
			recs: []rec{{"A", 20, 1}, {"B", 40, 0}, {"A", 25, 2}, {"A", 39, 4}, {"A", 40, 8}, {"B", 100, 0}},
			want: map[string][]string{"A": {"[10,20) n=1 sum=1", "[30,40) n=1 sum=8"}, "B": {"[30,40) n=1 sum=0"}},
			late: []string{"A@25"}},
		{name: "the skip bound: a record at stream time - grace - difference is not late, one a millisecond earlier is",
			recs: []rec{{"A", 50, 1}, {"A", 40, 2}, {"A", 39, 4}, {"B", 100, 0}},
			// A@40 finds [40,50] (left window closed) and starts its right
			// window from it; B's window is still open at the end.
			want: map[string][]string{"A": {"[40,50) n=2 sum=3", "[41,51) n=1 sum=1"}},
			late: []string{"A@39"}},
	})
	runConformance(t, slidingWindows(windows.SlidingWindows(5*time.Second, 0).Emitting(windows.EmitUpdates)), []conformanceCase{
		// Per record, in start order: the windows it updates, the previous
		// record's right window, its own left window, its own right window.
		{name: "updates: every window a record enters or starts, the last equal to the final",
			recs: javadoc,
			want: map[string][]string{
				"A": {"[3000,8000) n=1 sum=1", "[8001,13001) n=1 sum=2", "[4200,9200) n=2 sum=3", "[8001,13001) n=2 sum=5", "[9201,14201) n=1 sum=3", "[7400,12400) n=3 sum=6"},
				"B": {"[95000,100000) n=1 sum=0"}}},
	})
}
