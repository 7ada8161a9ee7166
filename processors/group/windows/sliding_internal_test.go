package windows

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestSlidingMigratesRecords: a sliding window set written before windows
// were kept holds the key's records; the first touch replays them into the
// windows they place (the SlidingWindows Javadoc example, difference 5 s),
// marking those that stream time had closed, and forgets the records.
func TestSlidingMigratesRecords(t *testing.T) {
	s := &Sliding[kitpb.WindowSet, *kitpb.WindowSet, testpb.Ping, *testpb.Ping]{
		name:    "sl",
		spec:    SlidingWindows(5*time.Second, 0),
		combine: func(acc, rec *testpb.Ping) { acc.Lat += rec.Lat },
	}
	rec := func(at int64, v float64) *kitpb.Window {
		b, err := marshalOpts.Marshal(&testpb.Ping{Lat: v})
		if err != nil {
			t.Fatal(err)
		}
		return &kitpb.Window{StartMs: at, EndMs: at, Count: 1, Sum: v, Agg: b}
	}
	ws := &kitpb.WindowSet{ClosedMs: 12400, Records: []*kitpb.Window{rec(8000, 1), rec(9200, 2), rec(12400, 4)}}
	if err := s.migrate(ws); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws.Windows {
		res, err := windowOf[testpb.Ping](w)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("[%d,%d] n=%d sum=%g agg=%g @%d closed=%t", w.StartMs, w.EndMs, w.Count, w.Sum, res.Agg.GetLat(), res.Time.UnixMilli(), w.Closed))
	}
	want := []string{
		"[3000,8000] n=1 sum=1 agg=1 @8000 closed=true",
		"[4200,9200] n=2 sum=3 agg=3 @9200 closed=true",
		"[7400,12400] n=3 sum=7 agg=7 @12400 closed=false",
		"[8001,13001] n=2 sum=6 agg=6 @12400 closed=false",
		"[9201,14201] n=1 sum=4 agg=4 @12400 closed=false",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("migrated\n %v\nwant\n %v", got, want)
	}
	if len(ws.Records) != 0 {
		t.Fatalf("records kept: %v", ws.Records)
	}
}

// BenchmarkSlidingPlace: one in-order record placed among the windows of a
// key receiving a record every 100 ms, difference 5 s (about 100 windows
// kept), with a custom aggregate; closed windows are dropped as advance
// drops them.
func BenchmarkSlidingPlace(b *testing.B) {
	s := &Sliding[kitpb.WindowSet, *kitpb.WindowSet, testpb.Ping, *testpb.Ping]{
		name:    "sl",
		spec:    SlidingWindows(5*time.Second, 0),
		combine: func(acc, rec *testpb.Ping) { acc.Lat += rec.Lat },
	}
	ws := &kitpb.WindowSet{}
	rec := &testpb.Ping{Lat: 1}
	fold := func(agg *testpb.Ping) { s.combine(agg, rec) }
	d := s.spec.Difference.Milliseconds()
	b.ReportAllocs()
	for i := range b.N {
		t := int64(i) * 100
		if _, err := s.place(ws, t, 1, fold, t); err != nil {
			b.Fatal(err)
		}
		ws.Windows = slices.DeleteFunc(ws.Windows, func(w *kitpb.Window) bool { return w.EndMs+d <= t })
	}
	b.ReportMetric(float64(len(ws.Windows)), "windows")
}
