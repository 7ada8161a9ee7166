package streams_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/kitpb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

var t0 = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

// windowTopology: ticks are int64 values holding their event time (ms).
func windowTopology() *topology.Topology {
	topo := opsTopology()
	const n = "google.protobuf.Int64Value"
	topo.Topics = append(topo.Topics,
		topology.Topic{Name: "ticks", Key: "id", Value: n, Partitions: 4, Cleanup: topology.CleanupDelete},
		topology.Topic{Name: "per-minute", Key: "id", Value: n, Partitions: 4, Cleanup: topology.CleanupDelete},
		topology.Topic{Name: "wc-table", Key: "id", Value: "fencestream.kit.v1.WindowSet", Partitions: 4, Cleanup: topology.CleanupCompact},
		topology.TimersTopic("wc", "id", 4),
	)
	return topo
}

func tickTime(v *num) time.Time { return time.UnixMilli(v.GetValue()) }

func windowed(t *testing.T, spec streams.Windowing) (*streamstest.Driver, streamstest.Input[num], streams.Table[num]) {
	t.Helper()
	b := streams.New(windowTopology(), "ops", nil)
	counts := b.Stream[num]("ticks").GroupByKey().WindowedBy(spec, tickTime).Count("wc")
	counts.ToStream().To("per-minute")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	return d, streamstest.InputTopic[num](d, "ticks"), counts
}

func tick(in streamstest.Input[num], key string, at time.Duration) {
	in.Pipe(key, wrapperspb.Int64(t0.Add(at).UnixMilli()))
}

// EmitFinal: a window's count is written once, when stream time passes its
// end plus grace (here by the key's own record); a record later than that
// is counted nowhere.
func TestWindowedCountFinal(t *testing.T) {
	d, in, counts := windowed(t, streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second)))
	tick(in, "k", 0)
	tick(in, "k", 30*time.Second)
	tick(in, "k", 65*time.Second) // within grace: window 08:00 still open
	if got := readNum(t, d, "per-minute"); len(got) != 0 {
		t.Fatalf("written before the window closed: %v", got)
	}
	tick(in, "k", 70*time.Second) // stream time 08:01:10: 08:00 closes
	tick(in, "k", 50*time.Second) // late
	want(t, readNum(t, d, "per-minute"), streams.WindowKey("k", t0)+"=2")
	if ws := streamstest.Windows(d, counts, "k"); len(ws) != 1 || !ws[0].Start.Equal(t0.Add(time.Minute)) || ws[0].Count != 2 {
		t.Fatalf("windows %+v, want the open 08:01 window with 2 records", ws)
	}
}

// EmitUpdates: every record writes its window's count so far.
func TestWindowedCountUpdates(t *testing.T) {
	d, in, _ := windowed(t, streams.TimeWindows(windows.Tumbling(time.Minute, 0).Emitting(windows.EmitUpdates)))
	tick(in, "k", 0)
	tick(in, "k", 30*time.Second)
	tick(in, "k", 61*time.Second)
	w0, w1 := streams.WindowKey("k", t0), streams.WindowKey("k", t0.Add(time.Minute))
	want(t, readNum(t, d, "per-minute"), w0+"=1", w0+"=2", w1+"=1")
}

// A window whose key gets no more records closes by the kit's stream-time
// timer, fired by the driver.
func TestWindowedCountClosedByTimer(t *testing.T) {
	d, in, _ := windowed(t, streams.TimeWindows(windows.Tumbling(time.Minute, 0)))
	tick(in, "a", 0)
	tick(in, "b", 2*time.Minute) // moves stream time (Goka's tester has one partition)
	if got := readNum(t, d, "per-minute"); len(got) != 0 {
		t.Fatalf("a's window closed without its timer: %v", got)
	}
	d.Advance(time.Minute)
	d.FireTimers()
	want(t, readNum(t, d, "per-minute"), streams.WindowKey("a", t0)+"=1")
}

// Sessions: records within the gap of each other are one session, counted
// when stream time passes its end plus gap plus grace.
func TestSessionWindowedCount(t *testing.T) {
	d, in, _ := windowed(t, streams.SessionWindows(windows.SessionWindows(time.Minute, 0)))
	tick(in, "k", 0)
	tick(in, "k", 50*time.Second)
	tick(in, "k", 100*time.Second) // within the gap of 50 s: one session 0..100 s
	tick(in, "k", 5*time.Minute)   // past 100 s + gap: the session closes
	want(t, readNum(t, d, "per-minute"), streams.WindowKey("k", t0)+"=3")
}

// Sliding windows: a window per record covering the difference before it.
func TestSlidingWindowedCount(t *testing.T) {
	d, in, _ := windowed(t, streams.SlidingWindows(windows.SlidingWindows(time.Minute, 0).Emitting(windows.EmitUpdates)))
	tick(in, "k", 0)
	tick(in, "k", 30*time.Second)
	got := readNum(t, d, "per-minute")
	if len(got) == 0 || got[len(got)-1] != streams.WindowKey("k", t0.Add(-30*time.Second))+"=2" {
		t.Fatalf("got %q, want the last result the window [-30 s, 30 s] with 2 records", got)
	}
}

// Kafka Streams' windowed count with suppress(untilWindowCloses): one
// result per key and minute, once stream time passes the minute's end
// plus grace.
// Describe names a windowed table by what it holds (the key's windows)
// and what flows on from it (one window's count).
func TestWindowedDescribe(t *testing.T) {
	b := streams.New(windowTopology(), "ops", nil)
	b.Stream[num]("ticks").GroupByKey().
		WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second)), tickTime).
		Count("wc").
		ToStream().To("per-minute")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := "    Table wc-table (fencestream.kit.v1.WindowSet), each window's google.protobuf.Int64Value as it is emitted\n      --> write per-minute\n"
	if got := app.Describe(); !strings.Contains(got, want) {
		t.Fatalf("describe:\n%s\nwant it to contain:\n%s", got, want)
	}
}

func Example_windowed() {
	b := streams.New(windowTopology(), "ops", nil)
	b.Stream[num]("ticks").GroupByKey().
		WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second)), tickTime).
		Count("wc").
		ToStream().To("per-minute")
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	d := streamstest.New(t, app, t0.Add(time.Hour))
	in := streamstest.InputTopic[num](d, "ticks")
	for _, at := range []time.Duration{0, 20 * time.Second, 40 * time.Second, 75 * time.Second} {
		tick(in, "k", at)
	}
	for _, r := range streamstest.OutputTopic[num](d, "per-minute").Read() {
		fmt.Println(r.Key, r.Value.GetValue())
	}
	// Output:
	// k@2027-01-15T08:00:00Z 3
}

// A route reads a windowed count's table as what it stores (the key's
// kitpb.WindowSet), on the driver's harness as in production: the guide's
// pinghours route. Its view must use the DSL's codec for the table, or
// Goka's tester refuses a second codec for the topic.
func TestRouteOverWindowedCount(t *testing.T) {
	d, in, _ := windowed(t, streams.TimeWindows(windows.Tumbling(time.Minute, 10*time.Second)))
	tick(in, "k", 0)
	tick(in, "k", 30*time.Second)
	tick(in, "k", 70*time.Second) // closes 08:00; 08:01 open with 1
	r := streams.Route("GET /v1/wc/{id}", "wc-table", func(_ string, st *kitpb.WindowSet) any {
		ws, err := windows.WindowsOf[emptypb.Empty](st)
		if err != nil {
			return err.Error()
		}
		out := []string{}
		for _, w := range ws {
			out = append(out, fmt.Sprint(w.Start.UTC().Format("15:04"), "=", w.Count))
		}
		return out
	})
	mux := http.NewServeMux()
	mux.Handle(r.Pattern, d.Harness().Route(r))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/wc/k", nil))
	if got, want := fmt.Sprint(rec.Code, " ", strings.TrimSpace(rec.Body.String())), `200 ["08:01=1"]`; got != want {
		t.Fatalf("GET /v1/wc/k: %s, want %s", got, want)
	}
}
