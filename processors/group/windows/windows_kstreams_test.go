package windows_test

import (
	"cmp"
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

// Reference cases transcribed from Kafka Streams' own unit tests (apache/kafka,
// streams/src/test/java/org/apache/kafka/streams/kstream/internals/), each
// naming the test it comes from, run through the kit's public API. A result
// prints as "key [start,end] aggregate@timestamp", with Kafka Streams' window
// bounds (a time window's end exclusive, a session's and a sliding window's
// inclusive) and its result timestamp (Window.Time); a session tombstone
// prints its aggregate as null. The aggregates are the tests' own: string
// concatenation (MockInitializer.STRING_INIT "0", MockAggregator.TOSTRING_ADDER
// "+value"; MockReducer.STRING_ADDER without the "0"), so the order records
// are folded in shows; for sessions, the count (aggregator +1, merger sum).
// Every case runs twice, looking for due timers after every record and once
// at the end, with identical results.

// ksRec is one input record: key, event time (ms since the epoch) and value
// (the tests' strings "1", "2", … as numbers).
type ksRec struct {
	key string
	at  int64
	val float64
}

type ksCase struct {
	name string
	// source is the Kafka Streams test method the case transcribes.
	source string
	recs   []ksRec
	// want is every result handed over, in order; nil: not checked (the
	// source asserts only table or late).
	want []string
	// byWindow: results are compared grouped by key and window start, in
	// arrival order within a window, as the source's comparator sorts them
	// (Kafka Streams' order across windows depends on its store iterator).
	byWindow bool
	// table is what a reader keyed by (key, start, end), as Kafka Streams'
	// windowed keys are, holds at the end: the last result of each window,
	// tombstones deleting; sorted. nil: not checked.
	table []string
	// late are the records refused as late, key@time in arrival order.
	late []string
}

// ksEmit is what a window kind calls with each result, already printed.
type ksEmit func(c *wsCtx, result string)

type ksKind func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit ksEmit) aggregate

// ksAgg prints a window's string aggregate (Agg.DeviceId), "0"-initialized
// unless reduce.
func ksAgg(win windows.Window[testpb.Ping, *testpb.Ping]) string {
	return win.Agg.GetDeviceId()
}

// concat folds value into a string aggregate as TOSTRING_ADDER (or, with
// reduce, STRING_ADDER) does.
func concat(agg *testpb.Ping, value float64, reduce bool) {
	switch {
	case agg.DeviceId == "" && reduce:
		agg.DeviceId = fmt.Sprint(value)
	case agg.DeviceId == "":
		agg.DeviceId = "0+" + fmt.Sprint(value)
	default:
		agg.DeviceId += "+" + fmt.Sprint(value)
	}
}

func ksPrint(key string, start, end, ts int64, agg string) string {
	return fmt.Sprintf("%s [%d,%d] %s@%d", key, start, end, agg, ts)
}

// ksFn is an aggregate function of the sources: how a value folds into the
// custom aggregate, how two sessions' aggregates merge, and how a result
// prints.
type ksFn struct {
	fold  func(agg *testpb.Ping, value float64)
	merge func(into, from *testpb.Ping)
	show  func(win windows.Window[testpb.Ping, *testpb.Ping]) string
}

var (
	// ksConcat is MockInitializer.STRING_INIT with MockAggregator.TOSTRING_ADDER.
	ksConcat = ksFn{fold: func(agg *testpb.Ping, v float64) { concat(agg, v, false) }, show: ksAgg}
	// ksCount is a count (Kafka Streams' aggregator +1 and merger sum;
	// ksqlDB's COUNT): Window.Count.
	ksCount = ksFn{show: func(win windows.Window[testpb.Ping, *testpb.Ping]) string { return fmt.Sprint(win.Count) }}
	// ksMax is ksqlDB's MAX of non-negative values (Agg.Lat).
	ksMax = ksFn{
		fold:  func(agg *testpb.Ping, v float64) { agg.Lat = max(agg.Lat, v) },
		merge: func(into, from *testpb.Ping) { into.Lat = max(into.Lat, from.Lat) },
		show: func(win windows.Window[testpb.Ping, *testpb.Ping]) string {
			return fmt.Sprint(win.Agg.GetLat())
		},
	}
)

// folder is fn's fold of value for Add, nil for a count.
func (fn ksFn) folder(value float64) func(*testpb.Ping) {
	if fn.fold == nil {
		return nil
	}
	return func(agg *testpb.Ping) { fn.fold(agg, value) }
}

// ksTimeWindows: NewWindows aggregating with fn.
func ksTimeWindows(spec windows.WindowSpec, fn ksFn) ksKind {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit ksEmit) aggregate {
		w := windows.NewWindows(g, "w", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				emit(c, ksPrint(c.Key(), win.Start.UnixMilli(), win.End.UnixMilli(), win.Time.UnixMilli(), fn.show(win)))
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return w.Add(c, st, at, value, fn.folder(value))
		}
	}
}

// ksSessions: NewSessions aggregating with fn; a Removed session prints
// null.
func ksSessions(spec windows.SessionSpec, fn ksFn) ksKind {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit ksEmit) aggregate {
		s := windows.NewSessions(g, "s", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws }, fn.merge,
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				agg := fn.show(win)
				if win.Removed {
					agg = "null"
				}
				emit(c, ksPrint(c.Key(), win.Start.UnixMilli(), win.End.UnixMilli(), win.Time.UnixMilli(), agg))
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return s.Add(c, st, at, value, fn.folder(value))
		}
	}
}

// ksSliding: NewSliding with a string aggregate; combine appends the
// record's value.
func ksSliding(spec windows.SlidingSpec, reduce bool) ksKind {
	return func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit ksEmit) aggregate {
		s := windows.NewSliding(g, "sl", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
			func(acc, rec *testpb.Ping) { concat(acc, rec.GetLat(), reduce) },
			func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
				emit(c, ksPrint(c.Key(), win.Start.UnixMilli(), win.End.UnixMilli(), win.Time.UnixMilli(), ksAgg(win)))
				return nil
			})
		return func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64) error {
			return s.Add(c, st, at, value, &testpb.Ping{Lat: value})
		}
	}
}

// runKS runs the input through a group holding one window set per key and
// returns the printed results in order and the late records.
func runKS(t *testing.T, kind ksKind, recs []ksRec, eager bool) ([]string, []string) {
	t.Helper()
	tt := tester.New(t)
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	add := kind(g, func(c *wsCtx, result string) {
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: result})
	})
	var mu sync.Mutex
	var late []string
	group.Stream(g, topicIn, func(c *wsCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		err := add(c, st, c.EventTime(), p.GetLat())
		if errors.Is(err, windows.ErrLate) {
			mu.Lock()
			late = append(late, fmt.Sprintf("%s@%d", c.Key(), p.GetDeviceTimeMs()))
			mu.Unlock()
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	wall := time.UnixMilli(base) // far after the inputs: stream time comes from the data
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	q := tt.NewQueueTracker(topicOut)
	for _, r := range recs {
		tt.Consume(topicIn, r.key, &testpb.Ping{DeviceId: r.key, Lat: r.val, DeviceTimeMs: r.at})
		if eager {
			fireTimers(t, tt, proc)
		}
	}
	fireTimers(t, tt, proc)
	var got []string
	for {
		_, v, ok := q.Next()
		if !ok {
			break
		}
		got = append(got, v.(*testpb.Trigger).GetFenceId())
	}
	mu.Lock()
	defer mu.Unlock()
	return got, slices.Clone(late)
}

// ksWindowOf splits a printed result into its windowed key and the rest.
func ksWindowOf(result string) (key string, start int64, rest string) {
	f := strings.SplitN(result, " ", 3)
	fmt.Sscanf(f[1], "[%d,", &start)
	return f[0], start, f[2]
}

// ksTable is the final content of a table keyed by (key, start, end).
func ksTable(results []string) []string {
	last := map[string]string{}
	for _, r := range results {
		f := strings.SplitN(r, " ", 3)
		id := f[0] + " " + f[1]
		if strings.HasPrefix(f[2], "null@") {
			delete(last, id)
			continue
		}
		last[id] = r
	}
	out := make([]string, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func runKSCases(t *testing.T, kind ksKind, cases []ksCase) {
	t.Helper()
	for _, tc := range cases {
		var firstGot []string
		for _, eager := range []bool{true, false} {
			mode := "timers only at the end"
			if eager {
				mode = "timers after every record"
			}
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				got, late := runKS(t, kind, tc.recs, eager)
				shown := got
				if tc.byWindow {
					shown = slices.Clone(got)
					slices.SortStableFunc(shown, func(a, b string) int {
						ka, sa, _ := ksWindowOf(a)
						kb, sb, _ := ksWindowOf(b)
						return cmp.Or(cmp.Compare(ka, kb), cmp.Compare(sa, sb))
					})
				}
				if tc.want != nil && !slices.Equal(shown, tc.want) {
					t.Errorf("%s: handed over\n %s\nwant\n %s", tc.source, strings.Join(shown, "\n "), strings.Join(tc.want, "\n "))
				}
				if tc.table != nil && !slices.Equal(ksTable(got), tc.table) {
					t.Errorf("%s: table at the end\n %s\nwant\n %s", tc.source, strings.Join(ksTable(got), "\n "), strings.Join(tc.table, "\n "))
				}
				if !slices.Equal(late, tc.late) {
					t.Errorf("%s: late %v, want %v", tc.source, late, tc.late)
				}
				if firstGot == nil {
					firstGot = got
				} else if !slices.Equal(got, firstGot) {
					t.Errorf("%s: timers at the end gave\n %v\nafter every record\n %v", tc.source, got, firstGot)
				}
			})
		}
	}
}

// gapMs is KStreamSessionWindowAggregateProcessorTest's GAP_MS.
const gapMs = int64(5 * 60 * 1000)

// TestKStreamsSessions: KStreamSessionWindowAggregateProcessorTest, which
// runs SessionWindows.ofInactivityGapWithNoGrace(GAP_MS) over a session store
// retaining GAP_MS*3 (Retention GAP_MS*3 − gap − grace here) and forwards
// every update, with a tombstone (new value null, timestamp the old end) for
// each session a merge removes. Where the source reads a caching store, it
// asserts what survives the cache: the table.
func TestKStreamsSessions(t *testing.T) {
	gap := time.Duration(gapMs) * time.Millisecond
	spec := windows.SessionWindows(gap, 0).Retain(3*gap - gap).Emitting(windows.EmitUpdates)
	runKSCases(t, ksSessions(spec, ksCount), []ksCase{
		{name: "a merge forwards a tombstone for a session with the merged start",
			source: "shouldImmediatelyForwardRemovedSessionsWhenMerging",
			recs:   []ksRec{{"a", 0, 1}, {"a", 5, 1}},
			want:   []string{"a [0,0] 1@0", "a [0,0] null@0", "a [0,5] 2@5"},
			table:  []string{"a [0,5] 2@5"}},
		{name: "separate sessions apart by the gap; a record at the same time updates without a tombstone",
			source: "shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap",
			recs:   []ksRec{{"mel", 0, 1}, {"mel", gapMs + 1, 1}, {"mel", gapMs + 1, 1}, {"mel", 2*gapMs + 2, 1}, {"mel", 2*gapMs + 2, 1}, {"mel", 2*gapMs + 2, 1}},
			want: []string{"mel [0,0] 1@0", "mel [300001,300001] 1@300001", "mel [300001,300001] 2@300001",
				"mel [600002,600002] 1@600002", "mel [600002,600002] 2@600002", "mel [600002,600002] 3@600002"},
			table: []string{"mel [0,0] 1@0", "mel [300001,300001] 2@300001", "mel [600002,600002] 3@600002"}},
		{name: "several keys, merging: no stale session survives",
			source: "shouldHandleMultipleSessionsAndMerging",
			recs: []ksRec{{"a", 0, 1}, {"b", 0, 1}, {"c", 0, 1}, {"d", 0, 1}, {"d", gapMs / 2, 2},
				{"a", gapMs + 1, 2}, {"b", gapMs + 1, 2}, {"a", gapMs + 1 + gapMs/2, 3}, {"c", gapMs + 1 + gapMs/2, 3}},
			table: []string{"a [0,0] 1@0", "a [300001,450001] 2@450001", "b [0,0] 1@0", "b [300001,300001] 1@300001",
				"c [0,0] 1@0", "c [450001,450001] 1@450001", "d [0,150000] 2@150000"}},
		{name: "a merge removes the merged sessions",
			source: "shouldRemoveMergedSessionsFromStateStore",
			recs:   []ksRec{{"a", 0, 1}, {"a", 100, 2}},
			table:  []string{"a [0,100] 2@100"}},
		{name: "the same time updates the session",
			source: "shouldUpdateSessionIfTheSameTime",
			recs:   []ksRec{{"mel", 0, 1}, {"mel", 0, 2}},
			table:  []string{"mel [0,0] 2@0"}},
		{name: "a record bridges a closed session still in the store with an open one",
			source: "shouldMergeSessions",
			// [0,0] closed when stream time passed 300,000 (gap, no grace);
			// the store still holds it, and the record at 150,000 is not late
			// (the merged session ends at 300,001).
			recs:  []ksRec{{"mel", 0, 1}, {"mel", gapMs + 1, 2}, {"mel", gapMs / 2, 3}},
			table: []string{"mel [0,300001] 3@300001"}},
	})
	runKSCases(t, ksSessions(windows.SessionWindows(10*time.Millisecond, 0).Emitting(windows.EmitUpdates), ksCount), []ksCase{
		{name: "zero grace: late once stream time is past end + gap",
			source: "shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace",
			recs:   []ksRec{{"dummy", 0, 0}, {"OnTime1", 0, 1}, {"dummy", 11, 0}, {"Late1", 0, 1}},
			table:  []string{"OnTime1 [0,0] 1@0", "dummy [0,0] 1@0", "dummy [11,11] 1@11"},
			late:   []string{"Late1@0"}},
	})
	runKSCases(t, ksSessions(windows.SessionWindows(10*time.Millisecond, time.Millisecond).Emitting(windows.EmitUpdates), ksCount), []ksCase{
		{name: "grace: on time at end + gap + grace, late after",
			source: "shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace",
			recs:   []ksRec{{"dummy", 0, 0}, {"OnTime1", 0, 1}, {"dummy", 11, 0}, {"OnTime2", 0, 1}, {"dummy", 12, 0}, {"Late1", 0, 1}},
			table:  []string{"OnTime1 [0,0] 1@0", "OnTime2 [0,0] 1@0", "dummy [0,0] 1@0", "dummy [11,12] 2@12"},
			late:   []string{"Late1@0"}},
	})
}

// TestKStreamsSlidingSmallInput: KStreamSlidingWindowAggregateTest
// testAggregateSmallInput and testReduceSmallInput, sliding windows of 10 ms
// with 5 ms of grace, both emit strategies. The source compares a set of
// (value, timestamp) per window start; here the windows' results in arrival
// order.
func TestKStreamsSlidingSmallInput(t *testing.T) {
	spec := windows.SlidingWindows(10*time.Millisecond, 5*time.Millisecond)
	aggIn := []ksRec{{"A", 10, 1}, {"A", 10, 2}, {"A", 14, 3}, {"A", 15, 4}, {"A", 20, 5}, {"A", 22, 6}, {"A", 30, 7}}
	runKSCases(t, ksSliding(spec.Emitting(windows.EmitUpdates), false), []ksCase{
		{name: "aggregate, updates", source: "testAggregateSmallInput (ON_WINDOW_UPDATE)", byWindow: true, recs: aggIn,
			want: []string{
				"A [0,10] 0+1@10", "A [0,10] 0+1+2@10",
				"A [4,14] 0+1+2+3@14",
				"A [5,15] 0+1+2+3+4@15",
				"A [10,20] 0+1+2+3+4+5@20",
				"A [11,21] 0+3@14", "A [11,21] 0+3+4@15", "A [11,21] 0+3+4+5@20",
				"A [12,22] 0+3+4+5+6@22",
				"A [15,25] 0+4@15", "A [15,25] 0+4+5@20", "A [15,25] 0+4+5+6@22",
				"A [16,26] 0+5@20", "A [16,26] 0+5+6@22",
				"A [20,30] 0+5+6+7@30",
				"A [21,31] 0+6@22", "A [21,31] 0+6+7@30",
				"A [23,33] 0+7@30",
			}},
	})
	runKSCases(t, ksSliding(spec, false), []ksCase{
		{name: "aggregate, final", source: "testAggregateSmallInput (ON_WINDOW_CLOSE)", byWindow: true, recs: aggIn,
			want: []string{"A [0,10] 0+1+2@10", "A [4,14] 0+1+2+3@14", "A [5,15] 0+1+2+3+4@15",
				"A [10,20] 0+1+2+3+4+5@20", "A [11,21] 0+3+4+5@20", "A [12,22] 0+3+4+5+6@22"}},
	})
	reduceIn := []ksRec{{"A", 10, 1}, {"A", 14, 2}, {"A", 15, 3}, {"A", 22, 4}, {"A", 26, 5}, {"A", 30, 6}}
	runKSCases(t, ksSliding(spec.Emitting(windows.EmitUpdates), true), []ksCase{
		{name: "reduce, updates", source: "testReduceSmallInput (ON_WINDOW_UPDATE)", byWindow: true, recs: reduceIn,
			want: []string{
				"A [0,10] 1@10",
				"A [4,14] 1+2@14",
				"A [5,15] 1+2+3@15",
				"A [11,21] 2@14", "A [11,21] 2+3@15",
				"A [12,22] 2+3+4@22",
				"A [15,25] 3@15", "A [15,25] 3+4@22",
				"A [16,26] 4@22", "A [16,26] 4+5@26",
				"A [20,30] 4+5+6@30",
				"A [23,33] 5@26", "A [23,33] 5+6@30",
				"A [27,37] 6@30",
			}},
	})
	runKSCases(t, ksSliding(spec, true), []ksCase{
		{name: "reduce, final", source: "testReduceSmallInput (ON_WINDOW_CLOSE)", byWindow: true, recs: reduceIn,
			want: []string{"A [0,10] 1@10", "A [4,14] 1+2@14", "A [5,15] 1+2+3@15", "A [11,21] 2+3@15", "A [12,22] 2+3+4@22"}},
	})
}

// TestKStreamsSlidingLargeInput: KStreamSlidingWindowAggregateTest
// testAggregateLargeInput, sliding windows of 10 ms, out-of-order records of
// four keys on one partition: 50 ms of grace under updates, 10 ms under final
// results (where B@14, C@11, D@11, D@12 and D@16 find their left windows
// closed). Compared sorted by key and window start, as the source does.
func TestKStreamsSlidingLargeInput(t *testing.T) {
	in := []ksRec{
		{"A", 10, 1}, {"A", 20, 2}, {"A", 22, 3}, {"A", 15, 4},
		{"B", 12, 1}, {"B", 13, 2}, {"B", 18, 3}, {"B", 19, 4}, {"B", 25, 5}, {"B", 14, 6},
		{"C", 11, 1}, {"C", 15, 2}, {"C", 16, 3}, {"C", 21, 4}, {"C", 23, 5},
		{"D", 11, 4}, {"D", 12, 2}, {"D", 29, 3}, {"D", 16, 5},
	}
	runKSCases(t, ksSliding(windows.SlidingWindows(10*time.Millisecond, 50*time.Millisecond).Emitting(windows.EmitUpdates), false), []ksCase{
		{name: "updates", source: "testAggregateLargeInput (ON_WINDOW_UPDATE)", byWindow: true, recs: in,
			want: []string{
				"A [0,10] 0+1@10",
				"A [5,15] 0+1+4@15",
				"A [10,20] 0+1+2@20", "A [10,20] 0+1+2+4@20",
				"A [11,21] 0+2@20", "A [11,21] 0+2+4@20",
				"A [12,22] 0+2+3@22", "A [12,22] 0+2+3+4@22",
				"A [16,26] 0+2+3@22",
				"A [21,31] 0+3@22",
				"B [2,12] 0+1@12",
				"B [3,13] 0+1+2@13",
				"B [4,14] 0+1+2+6@14",
				"B [8,18] 0+1+2+3@18", "B [8,18] 0+1+2+3+6@18",
				"B [9,19] 0+1+2+3+4@19", "B [9,19] 0+1+2+3+4+6@19",
				"B [13,23] 0+2@13", "B [13,23] 0+2+3@18", "B [13,23] 0+2+3+4@19", "B [13,23] 0+2+3+4+6@19",
				"B [14,24] 0+3@18", "B [14,24] 0+3+4@19", "B [14,24] 0+3+4+6@19",
				"B [15,25] 0+3+4+5@25",
				"B [19,29] 0+4@19", "B [19,29] 0+4+5@25",
				"B [20,30] 0+5@25",
				"C [1,11] 0+1@11",
				"C [5,15] 0+1+2@15",
				"C [6,16] 0+1+2+3@16",
				"C [11,21] 0+1+2+3+4@21",
				"C [12,22] 0+2@15", "C [12,22] 0+2+3@16", "C [12,22] 0+2+3+4@21",
				"C [13,23] 0+2+3+4+5@23",
				"C [16,26] 0+3@16", "C [16,26] 0+3+4@21", "C [16,26] 0+3+4+5@23",
				"C [17,27] 0+4@21", "C [17,27] 0+4+5@23",
				"C [22,32] 0+5@23",
				"D [1,11] 0+4@11",
				"D [2,12] 0+4+2@12",
				"D [6,16] 0+4+2+5@16",
				"D [12,22] 0+2@12", "D [12,22] 0+2+5@16",
				"D [13,23] 0+5@16",
				"D [19,29] 0+3@29",
			}},
	})
	runKSCases(t, ksSliding(windows.SlidingWindows(10*time.Millisecond, 10*time.Millisecond), false), []ksCase{
		{name: "final", source: "testAggregateLargeInput (ON_WINDOW_CLOSE)", byWindow: true, recs: in,
			want: []string{
				"A [0,10] 0+1@10", "A [5,15] 0+1+4@15",
				"B [2,12] 0+1@12", "B [3,13] 0+1+2@13", "B [8,18] 0+1+2+3+6@18",
				"C [5,15] 0+2@15", "C [6,16] 0+2+3@16",
			}},
	})
}

// TestKStreamsHoppingUpdates: KStreamWindowAggregateTest testAggBasic,
// hopping windows of 10 ms advancing by 5 ms, every update forwarded (a
// KTable's changes), each stamped with the largest record time in its window.
// The source's grace is the old default, 24 h; here 1 s, which no record in
// the input comes near either.
func TestKStreamsHoppingUpdates(t *testing.T) {
	runKSCases(t, ksTimeWindows(windows.Hopping(10*time.Millisecond, 5*time.Millisecond, time.Second).Emitting(windows.EmitUpdates), ksConcat), []ksCase{
		{name: "every change, stamped with the window's latest record", source: "testAggBasic",
			recs: []ksRec{
				{"A", 0, 1}, {"B", 1, 2}, {"C", 2, 3}, {"D", 3, 4}, {"A", 4, 1},
				{"A", 5, 1}, {"B", 6, 2}, {"D", 7, 4}, {"B", 8, 2}, {"C", 9, 3},
				{"A", 10, 1}, {"B", 11, 2}, {"D", 12, 4}, {"B", 13, 2}, {"C", 14, 3},
				{"B", 3, 1}, {"B", 2, 2}, {"B", 9, 3},
			},
			want: []string{
				"A [0,10] 0+1@0", "B [0,10] 0+2@1", "C [0,10] 0+3@2", "D [0,10] 0+4@3", "A [0,10] 0+1+1@4",
				"A [0,10] 0+1+1+1@5", "A [5,15] 0+1@5", "B [0,10] 0+2+2@6", "B [5,15] 0+2@6",
				"D [0,10] 0+4+4@7", "D [5,15] 0+4@7", "B [0,10] 0+2+2+2@8", "B [5,15] 0+2+2@8",
				"C [0,10] 0+3+3@9", "C [5,15] 0+3@9",
				"A [5,15] 0+1+1@10", "A [10,20] 0+1@10", "B [5,15] 0+2+2+2@11", "B [10,20] 0+2@11",
				"D [5,15] 0+4+4@12", "D [10,20] 0+4@12", "B [5,15] 0+2+2+2+2@13", "B [10,20] 0+2+2@13",
				"C [5,15] 0+3+3@14", "C [10,20] 0+3@14",
				"B [0,10] 0+2+2+2+1@8", "B [0,10] 0+2+2+2+1+2@8", "B [0,10] 0+2+2+2+1+2+3@9", "B [5,15] 0+2+2+2+2+3@13",
			}},
	})
}

// TestWindowBoundOption: ksqlDB's default grace, 24 h minus the window size,
// on 60 s windows advancing by 30 s keeps up to 2882 windows per key: refused
// under the default bound, accepted when the spec states it.
func TestWindowBoundOption(t *testing.T) {
	spec := windows.Hopping(time.Minute, 30*time.Second, 24*time.Hour-time.Minute)
	build := func(spec windows.WindowSpec) error {
		g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
		windows.NewWindows[testpb.Ping](g, "w", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws }, nil)
		group.Stream(g, topicIn, func(*wsCtx, *testpb.Ping) error { return nil })
		group.Output[testpb.Trigger](g, topicOut)
		_, err := g.Graph()
		return err
	}
	if err := build(spec); err == nil || !strings.Contains(err.Error(), "2882 windows per key, above the bound 1024") {
		t.Fatalf("a day of grace under the default bound: %v", err)
	}
	if err := build(spec.Bounded(2882)); err != nil {
		t.Fatalf("a day of grace with Bounded(2882): %v", err)
	}
	if err := build(spec.Bounded(2881)); err == nil {
		t.Fatal("Bounded(2881) accepted a spec needing 2882")
	}
	if err := build(spec.Bounded(-1)); err == nil {
		t.Fatal("a negative bound accepted")
	}
}

// ksqlDay is ksqlDB's (and older Kafka Streams') default grace: 24 h minus
// the window size.
func ksqlDay(size time.Duration) time.Duration { return 24*time.Hour - size }

// TestKsqlHoppingChanges: ksqlDB query-validation-tests hopping-windows.json
// (confluentinc/ksql, ksqldb-functional-tests/src/test/resources/
// query-validation-tests/), tables under EMIT CHANGES with ksqlDB's default
// grace, which the default bound refuses on these windows: the spec states
// its bound. Keys are the tests' ids; values the aggregate column.
func TestKsqlHoppingChanges(t *testing.T) {
	size := 30 * time.Second
	runKSCases(t, ksTimeWindows(windows.Hopping(size, 10*time.Second, ksqlDay(size)).Bounded(8642).Emitting(windows.EmitUpdates), ksMax), []ksCase{
		{name: "max hopping", source: "hopping-windows.json: max hopping",
			recs: []ksRec{{"0", 0, 0}, {"0", 10000, 5}, {"100", 30000, 100}, {"100", 45000, 6}, {"100", 50000, 300}, {"0", 35000, 100}, {"0", 40000, 2000}},
			want: []string{
				"0 [0,30000] 0@0", "0 [0,30000] 5@10000", "0 [10000,40000] 5@10000",
				"100 [10000,40000] 100@30000", "100 [20000,50000] 100@30000", "100 [30000,60000] 100@30000",
				"100 [20000,50000] 100@45000", "100 [30000,60000] 100@45000", "100 [40000,70000] 6@45000",
				"100 [30000,60000] 300@50000", "100 [40000,70000] 300@50000", "100 [50000,80000] 300@50000",
				"0 [10000,40000] 100@35000", "0 [20000,50000] 100@35000", "0 [30000,60000] 100@35000",
				"0 [20000,50000] 2000@40000", "0 [30000,60000] 2000@40000", "0 [40000,70000] 2000@40000",
			}},
	})
	size = 5 * time.Second
	runKSCases(t, ksTimeWindows(windows.Hopping(size, time.Second, ksqlDay(size)).Bounded(86402).Emitting(windows.EmitUpdates), ksCount), []ksCase{
		{name: "count", source: "hopping-windows.json: count",
			recs: []ksRec{{"0", 10345, 0}, {"0", 13251, 0}},
			want: []string{
				"0 [6000,11000] 1@10345", "0 [7000,12000] 1@10345", "0 [8000,13000] 1@10345", "0 [9000,14000] 1@10345", "0 [10000,15000] 1@10345",
				"0 [9000,14000] 2@13251", "0 [10000,15000] 2@13251", "0 [11000,16000] 1@13251", "0 [12000,17000] 1@13251", "0 [13000,18000] 1@13251",
			}},
	})
}

// TestKsqlTumblingChanges: ksqlDB query-validation-tests tumbling-windows.json
// "max tumbling", WINDOW TUMBLING (SIZE 30 SECONDS) under EMIT CHANGES with
// ksqlDB's default grace: the "keep up to 2882 windows per key".
func TestKsqlTumblingChanges(t *testing.T) {
	size := 30 * time.Second
	runKSCases(t, ksTimeWindows(windows.Tumbling(size, ksqlDay(size)).Bounded(2882).Emitting(windows.EmitUpdates), ksMax), []ksCase{
		{name: "max tumbling", source: "tumbling-windows.json: max tumbling",
			recs: []ksRec{{"0", 0, 0}, {"0", 10000, 5}, {"100", 30000, 100}, {"100", 45000, 6}, {"100", 50000, 300}, {"0", 35000, 100}, {"0", 40000, 2000}},
			want: []string{
				"0 [0,30000] 0@0", "0 [0,30000] 5@10000",
				"100 [30000,60000] 100@30000", "100 [30000,60000] 100@45000", "100 [30000,60000] 300@50000",
				"0 [30000,60000] 100@35000", "0 [30000,60000] 2000@40000",
			}},
	})
}

// TestKsqlSessionChanges: ksqlDB query-validation-tests session-windows.json
// "max session", WINDOW SESSION (30 SECONDS) under EMIT CHANGES: each merge
// forwards a tombstone for the session it replaces, though the merged
// session keeps its start.
func TestKsqlSessionChanges(t *testing.T) {
	gap := 30 * time.Second
	runKSCases(t, ksSessions(windows.SessionWindows(gap, ksqlDay(gap)).Emitting(windows.EmitUpdates), ksMax), []ksCase{
		{name: "max session", source: "session-windows.json: max session",
			recs: []ksRec{{"0", 0, 0}, {"0", 10000, 5}, {"1", 10000, 100}, {"1", 40000, 200}},
			want: []string{
				"0 [0,0] 0@0", "0 [0,0] null@0", "0 [0,10000] 5@10000",
				"1 [10000,10000] 100@10000", "1 [10000,10000] null@10000", "1 [10000,40000] 200@40000",
			},
			table: []string{"0 [0,10000] 5@10000", "1 [10000,40000] 200@40000"}},
	})
}
