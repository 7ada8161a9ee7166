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

// The window tests keep a kitpb.WindowSet as the whole state of a key; each
// ping adds (Lat as the value, the largest Lon as the custom aggregate) at its
// event time, and each closed window is emitted as a Trigger: FenceId the
// window ("HH:MM-HH:MM" after base), Hlc the count, Lat the sum, Lon the max.
type (
	wsCtx = group.Context[kitpb.WindowSet, *kitpb.WindowSet]
)

type windowHarness struct {
	tt   *tester.Tester
	proc *group.Processor
	out  *tester.QueueTracker
	mu   sync.Mutex
	late []string
}

func clock(ms int64) string {
	d := time.Duration(ms-base) * time.Millisecond
	return fmt.Sprintf("%02d:%02d", int(d.Hours()), int(d.Minutes())%60)
}

func newWindowHarness(t *testing.T, spec windows.WindowSpec) *windowHarness {
	t.Helper()
	h := &windowHarness{tt: tester.New(t)}
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	w := windows.NewWindows(g, "pings", spec, func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws },
		func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
			out.Emit(c, c.Key(), &testpb.Trigger{
				FenceId: clock(win.Start.UnixMilli()) + "-" + clock(win.End.UnixMilli()),
				Hlc:     uint64(win.Count), Lat: win.Sum, Lon: win.Agg.GetLon(), EventTimeMs: win.End.UnixMilli(),
			})
			return nil
		})
	group.Stream(g, topicIn, func(c *wsCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		err := w.Add(c, st, c.EventTime(), p.GetLat(), func(agg *testpb.Ping) { agg.Lon = max(agg.Lon, p.GetLon()) })
		if errors.Is(err, windows.ErrLate) {
			h.mu.Lock()
			h.late = append(h.late, c.Key()+"@"+clock(p.GetDeviceTimeMs()))
			h.mu.Unlock()
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	wall := time.UnixMilli(base).Add(48 * time.Hour) // far ahead: stream time comes from the data
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(h.tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	h.proc = proc
	runUntilCleanup(t, proc.Run)
	h.out = h.tt.NewQueueTracker(topicOut)
	return h
}

func (h *windowHarness) add(key string, at time.Duration, value, lon float64) {
	h.tt.Consume(topicIn, key, &testpb.Ping{DeviceId: key, Lat: value, Lon: lon, DeviceTimeMs: base + at.Milliseconds()})
}

func (h *windowHarness) closed(t *testing.T) []string {
	t.Helper()
	fireTimers(t, h.tt, h.proc)
	var got []string
	for {
		k, v, ok := h.out.Next()
		if !ok {
			return got
		}
		tr := v.(*testpb.Trigger)
		got = append(got, fmt.Sprintf("%s %s n=%d sum=%g max=%g", k, tr.FenceId, tr.Hlc, tr.Lat, tr.Lon))
		// Keys close in no fixed order (by a record of the key, or by its
		// timer); each key's windows close in start order.
		slices.Sort(got)
	}
}

func (h *windowHarness) windows(t *testing.T, key string) []string {
	t.Helper()
	st, err := group.StateOf[kitpb.WindowSet](h.tt.TableValue(topicTab, key))
	if err != nil {
		t.Fatal(err)
	}
	wins, err := windows.WindowsOf[testpb.Ping](st)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range wins {
		out = append(out, fmt.Sprintf("%s n=%d closed=%v", clock(w.Start.UnixMilli()), w.Count, w.Closed))
	}
	return out
}

func TestTumblingWindowClosedByStreamTimeTimer(t *testing.T) {
	h := newWindowHarness(t, windows.Tumbling(time.Hour, 10*time.Minute))
	h.add("k", 10*time.Minute, 1, 5)
	h.add("k", 50*time.Minute, 2, 7)
	h.add("k", 65*time.Minute, 4, 1) // the next window; stream time 01:05
	if got := h.closed(t); len(got) != 0 {
		t.Fatalf("closed before end + grace: %v", got)
	}
	h.add("k", 55*time.Minute, 8, 3) // out of order, within grace: counted
	h.add("other", 71*time.Minute, 0, 0)
	if got := h.closed(t); strings.Join(got, "|") != "k 00:00-01:00 n=3 sum=11 max=7" {
		t.Fatalf("closed %v, want k's first hour with 3 records", got)
	}
	// After its close a record for it is late: counted, not added.
	h.add("k", 58*time.Minute, 16, 9)
	h.mu.Lock()
	late := strings.Join(h.late, ",")
	h.mu.Unlock()
	if late != "k@00:58" {
		t.Fatalf("late records %q, want k@00:58", late)
	}
	if got := h.windows(t, "k"); strings.Join(got, ",") != "01:00 n=1 closed=false" {
		t.Fatalf("windows kept %v: the closed one (retention 0) must be gone", got)
	}
	st, _ := group.StateOf[kitpb.WindowSet](h.tt.TableValue(topicTab, "k"))
	if st.GetLate() != 1 {
		t.Fatalf("late count in state %d, want 1", st.GetLate())
	}
	// The second window closes when stream time passes 02:10.
	h.add("other", 131*time.Minute, 0, 0)
	got := h.closed(t)
	if strings.Join(got, "|") != "k 01:00-02:00 n=1 sum=4 max=1|other 01:00-02:00 n=1 sum=0 max=0" {
		t.Fatalf("closed %v", got)
	}
}

func TestHoppingWindowsAndRetention(t *testing.T) {
	h := newWindowHarness(t, windows.Hopping(time.Hour, 30*time.Minute, 0).Retain(2*time.Hour))
	h.add("k", 45*time.Minute, 1, 0) // in [00:00,01:00) and [00:30,01:30)
	if got := h.windows(t, "k"); strings.Join(got, ",") != "00:00 n=1 closed=false,00:30 n=1 closed=false" {
		t.Fatalf("windows %v", got)
	}
	h.add("k", 95*time.Minute, 1, 0) // [01:00,02:00) and [01:30,02:30); stream time 01:35
	if got := h.closed(t); strings.Join(got, "|") != "k 00:00-01:00 n=1 sum=1 max=0|k 00:30-01:30 n=1 sum=1 max=0" {
		t.Fatalf("closed %v", got)
	}
	// Closed windows stay for the retention (views read them), then go.
	if got := h.windows(t, "k"); len(got) != 4 || got[0] != "00:00 n=1 closed=true" {
		t.Fatalf("windows %v", got)
	}
	h.add("k", 200*time.Minute, 1, 0) // stream time 03:20: 00:00-01:00 is past end + 2h
	h.closed(t)
	if got := h.windows(t, "k"); got[0] != "00:30 n=1 closed=true" {
		t.Fatalf("after retention: %v", got)
	}
}

func TestWindowSpecBounds(t *testing.T) {
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	windows.NewWindows[testpb.Ping](g, "w", windows.Hopping(time.Hour, time.Second, 0), func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws }, nil)
	group.Stream(g, topicIn, func(*wsCtx, *testpb.Ping) error { return nil })
	group.Output[testpb.Trigger](g, topicOut)
	if _, err := g.Graph(); err == nil || !strings.Contains(err.Error(), "windows per key") {
		t.Fatalf("3600 windows per key accepted: %v", err)
	}
}
