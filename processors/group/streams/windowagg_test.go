package streams_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// aggTopology adds what the windowed Aggregate, Through and Route tests
// read and write: group tally keeps a testpb.Tally per id.
func aggTopology() *topology.Topology {
	topo := windowTopology()
	tp := func(name, key, value string, c topology.Cleanup) topology.Topic {
		return topology.Topic{Name: name, Key: key, Value: value, Partitions: 4, Cleanup: c}
	}
	const n = "google.protobuf.Int64Value"
	topo.Topics = append(topo.Topics,
		tp("tally-table", "id", "fencestream.kit.test.v1.Tally", topology.CleanupCompact),
		topology.TimersTopic("tally", "id", 4),
		tp("tally-windows", "id", "fencestream.kit.v1.Window", topology.CleanupDelete),
		tp("counts", "id", n, topology.CleanupDelete),
		tp("by-count", "count", n, topology.CleanupDelete),
		tp("recount-table", "count", n, topology.CleanupCompact),
		tp("ticks-by-age", "age", n, topology.CleanupDelete),
		tp("aged-table", "age", n, topology.CleanupCompact),
		topology.TimersTopic("aged", "age", 4),
	)
	return topo
}

// tally builds ticks -> windows -> group tally (its own Tally: the records
// add took) -> tally-windows, with set nil (the Tally's one WindowSet).
func tally(t *testing.T, w streams.Windowing) (*streamstest.Driver, streamstest.Input[num]) {
	t.Helper()
	b := streams.New(aggTopology(), "ops", nil)
	b.Stream[num]("ticks").GroupByKey().WindowedBy(w, tickTime).
		Aggregate("tally", nil, func(_ string, _ *num, agg *testpb.Tally) { agg.Records++ }).
		ToStream().To("tally-windows")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	return d, streamstest.InputTopic[num](d, "ticks")
}

// results are the windows handed over, as key@start=count (start in ms
// since since).
func results(d *streamstest.Driver, since time.Time) []string {
	var out []string
	for _, r := range streamstest.OutputTopic[kitpb.Window](d, "tally-windows").Read() {
		out = append(out, fmt.Sprintf("%s@%d=%d", r.Key, r.Value.GetStartMs()-since.UnixMilli(), r.Value.GetCount()))
	}
	return out
}

// Kafka Streams' KStreamWindowAggregateTest.testAggBasic: hopping windows
// of 10 ms every 5 ms, every update handed over, the last three records of
// B out of order (within grace); its results are strings of the values
// added, here their number.
func TestWindowedAggregateKafkaStreamsBasic(t *testing.T) {
	d, in := tally(t, streams.TimeWindows(windows.Hopping(10*time.Millisecond, 5*time.Millisecond, 100*time.Millisecond).Emitting(windows.EmitUpdates)))
	for _, r := range []struct {
		key string
		at  int64
	}{{"A", 0}, {"B", 1}, {"C", 2}, {"D", 3}, {"A", 4}, {"A", 5}, {"B", 6}, {"D", 7}, {"B", 8}, {"C", 9},
		{"A", 10}, {"B", 11}, {"D", 12}, {"B", 13}, {"C", 14}, {"B", 3}, {"B", 2}, {"B", 9}} {
		in.Pipe(r.key, wrapperspb.Int64(r.at))
	}
	want(t, results(d, time.UnixMilli(0)),
		"A@0=1", "B@0=1", "C@0=1", "D@0=1", "A@0=2", "A@0=3", "A@5=1", "B@0=2", "B@5=1", "D@0=2", "D@5=1",
		"B@0=3", "B@5=2", "C@0=2", "C@5=1", "A@5=2", "A@10=1", "B@5=3", "B@10=1", "D@5=2", "D@10=1",
		"B@5=4", "B@10=2", "C@5=2", "C@10=1", "B@0=4", "B@0=5", "B@0=6", "B@5=5")
	if st := grouptest.State[testpb.Tally](d.Harness(), "tally-table", "B"); st.GetRecords() != 8 || len(st.GetWindows().GetWindows()) != 3 {
		t.Fatalf("B's tally %v, want 8 records in 3 windows", st)
	}
}

func epoch(at time.Duration) *num { return wrapperspb.Int64(t0.Add(at).UnixMilli()) }

// Under EmitFinal a window is handed over once, closed; a late record is
// counted in the set's late count and never reaches add.
func TestWindowedAggregateLateNotAdded(t *testing.T) {
	d, in := tally(t, streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second).Retain(time.Hour)))
	for _, at := range []time.Duration{0, 30 * time.Second, 65 * time.Second, 70 * time.Second, 50 * time.Second} {
		in.Pipe("k", epoch(at)) // 70 s closes 08:00; 50 s is then late
	}
	out := streamstest.OutputTopic[kitpb.Window](d, "tally-windows").Read()
	if len(out) != 1 || out[0].Key != "k" || out[0].Value.GetStartMs() != t0.UnixMilli() || out[0].Value.GetEndMs() != t0.Add(time.Minute).UnixMilli() ||
		out[0].Value.GetCount() != 2 || !out[0].Value.GetClosed() || out[0].Value.GetMaxMs() != t0.Add(30*time.Second).UnixMilli() {
		t.Fatalf("handed over %v, want k's closed window 08:00 with 2 records, the last at 08:00:30", out)
	}
	st := grouptest.State[testpb.Tally](d.Harness(), "tally-table", "k")
	if st.GetRecords() != 4 || st.GetWindows().GetLate() != 1 {
		t.Fatalf("tally %v, want 4 records added and 1 late", st)
	}
}

// A session a bridging record merges into another is handed over empty,
// withdrawing it, before the merged one.
func TestWindowedAggregateSessionWithdrawn(t *testing.T) {
	d, in := tally(t, streams.SessionWindows(windows.SessionWindows(time.Minute, time.Hour).Emitting(windows.EmitUpdates)))
	for _, at := range []time.Duration{0, 100 * time.Second, 50 * time.Second} {
		in.Pipe("k", epoch(at))
	}
	want(t, results(d, t0), "k@0=1", "k@100000=1", "k@0=0", "k@100000=0", "k@0=3")
}

// Without set, the windows go in A's one WindowSet field; an A with none is
// refused when the app is built.
func TestWindowedAggregateNeedsAWindowSet(t *testing.T) {
	b := streams.New(aggTopology(), "ops", nil)
	b.Stream[num]("ticks").GroupByKey().WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 0)), tickTime).
		Aggregate("wc", nil, func(string, *num, *kitpb.WindowSet) {})
	_, err := b.Build()
	if err == nil || !strings.Contains(err.Error(), "fencestream.kit.v1.WindowSet has 0 fields of type fencestream.kit.v1.WindowSet") {
		t.Fatalf("Build: %v, want the missing WindowSet field named", err)
	}
}

// Through after a table's stream: the table's updates are written to a
// topic of its key and read back, so they can be re-keyed (a GroupBy
// straight on the table's stream is refused); a record written to that
// topic by another (a replay) is read as the app's own.
func TestThroughRekeysATablesStream(t *testing.T) {
	b := streams.New(aggTopology(), "ops", nil)
	b.Stream[str]("in").GroupByKey().Count("agg").ToStream().Through("counts").
		GroupBy(byLen, "by-count", func(_ string, n *num) string { return strconv.FormatInt(n.GetValue(), 10) }).
		Count("recount")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0)
	pipe(t, d, "in", "a", "x", "a", "y", "b", "z")
	streamstest.InputTopic[num](d, "counts").Pipe("c", wrapperspb.Int64(2))
	want(t, readNum(t, d, "by-count"), "1=1", "2=2", "1=1", "2=2")
	h := d.Harness()
	for k, n := range map[string]int64{"1": 2, "2": 2} {
		if got := grouptest.State[num](h, "recount-table", k).GetValue(); got != n {
			t.Errorf("recount[%s] = %d, want %d", k, got, n)
		}
	}

	refused := streams.New(aggTopology(), "ops", nil)
	refused.Stream[str]("in").GroupByKey().Count("agg").ToStream().GroupBy(byLen, "by-count", func(string, *num) string { return "" })
	if _, err := refused.Build(); err == nil || !strings.Contains(err.Error(), "SelectKey on the stream of table agg-table") {
		t.Fatalf("Build: %v, want the re-key of a table's stream refused", err)
	}
}

// A re-key keeps the records' event time: the group reading the re-keyed
// topic moves its stream time by it, so its state TTL expires a key.
func TestRekeyKeepsEventTime(t *testing.T) {
	b := streams.New(aggTopology(), "ops", nil)
	aged := b.Stream[num]("ticks", streams.EventTime(tickTime)).
		GroupBy(byLen, "ticks-by-age", func(_ string, v *num) string {
			return map[bool]string{true: "old", false: "new"}[tickTime(v).Before(t0.Add(time.Hour))]
		}).
		Count("aged", group.StateTTL(time.Hour))
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	in := streamstest.InputTopic[num](d, "ticks")
	in.Pipe("a", epoch(0))
	in.Pipe("b", epoch(3*time.Hour)) // stream time 11:00: "old" is past its TTL
	d.Advance(time.Minute)
	d.FireTimers()
	if old, young := streamstest.Get(d, aged, "old"), streamstest.Get(d, aged, "new"); old != nil || young.GetValue() != 1 {
		t.Fatalf("old %v, new %v: want old expired by stream time, new counted once", old, young)
	}
}

// Route answers a table's value for the pattern's wildcard as JSON, and 404
// for a key the table does not hold.
func TestRoute(t *testing.T) {
	d := build(t, func(b *streams.Builder) { b.Stream[str]("in").GroupByKey().Count("agg") })
	pipe(t, d, "in", "a", "x", "a", "y")
	r := streams.Route("GET /v1/agg/{id}", "agg-table", func(id string, n *num) any {
		return map[string]any{"id": id, "count": n.GetValue()}
	})
	mux := http.NewServeMux()
	mux.Handle(r.Pattern, d.Harness().Route(r))
	for path, want := range map[string]string{
		"/v1/agg/a": `200 {"count":2,"id":"a"}`,
		"/v1/agg/b": `404 {"error":"no id b in agg-table","status":404}`,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		if got := fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(string(body))); got != want {
			t.Errorf("GET %s: %s, want %s", path, got, want)
		}
	}
}

// A windowed aggregation into the app's own message: its table holds a
// device's tally and windows (as devicestats' does); its stream hands over
// each closed window, which the app maps into its own message.
func Example_windowedAggregate() {
	b := streams.New(aggTopology(), "ops", nil)
	tallies := b.Stream[num]("ticks").GroupByKey().
		WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second)), tickTime).
		Aggregate("tally", nil, func(_ string, _ *num, agg *testpb.Tally) { agg.Records++ })
	tallies.ToStream().
		MapValues(func(w *kitpb.Window) *num { return wrapperspb.Int64(w.GetCount()) }).
		To("per-minute")
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	d := streamstest.New(t, app, t0.Add(time.Hour))
	in := streamstest.InputTopic[num](d, "ticks")
	for _, at := range []time.Duration{0, 20 * time.Second, 40 * time.Second, 75 * time.Second, 30 * time.Second} {
		in.Pipe("k", epoch(at)) // 75 s closes 08:00; 30 s is then late
	}
	for _, r := range streamstest.OutputTopic[num](d, "per-minute").Read() {
		fmt.Println(r.Key, r.Value.GetValue())
	}
	st := streamstest.Stored[testpb.Tally](d, tallies, "k")
	fmt.Println("records", st.GetRecords(), "late", st.GetWindows().GetLate())
	// Output:
	// k 3
	// records 4 late 1
}
