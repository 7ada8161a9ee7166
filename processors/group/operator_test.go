package group_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// An operator built on the public API alone (as processors/group/windows
// is): its timer fires its own handler and never the group's OnTimer, a
// handler cannot set it, the stream time it judges at is raised for the
// partition, its late records are counted, and a refused spec stops the
// build. A ping's Lat says what the handler does: 1 sets the operator's
// timer and a handler's timer "user" a minute after its event time, 2 asks
// the operator's stream time with a kept time of base+1h, 3 notes the
// partition's stream time, 4 counts a late record.
func TestOperatorIsItsOwn(t *testing.T) {
	var (
		mu    sync.Mutex
		fired []string
		seen  []string
		errs  []error
	)
	note := func(list *[]string, s string) { mu.Lock(); *list = append(*list, s); mu.Unlock() }
	tt := tester.New(t)
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Output[testpb.Trigger](g, topicOut)
	op := group.NewOperator(g, "test", "op")
	op.OnTimer(func(c *ctxT, tm group.Timer) error { note(&fired, "op:"+c.Key()+":"+tm.Name); return nil })
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error { note(&fired, "user:"+c.Key()+":"+tm.Name); return nil })
	kept := time.UnixMilli(base).Add(time.Hour)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		at := c.EventTime().Add(time.Minute)
		var err error
		switch p.GetLat() {
		case 1:
			err = errors.Join(op.SetTimer(c, at, group.StreamClock), c.SetTimer("user", at, group.StreamClock))
			if e := c.SetTimer("kit/test/op", at, group.StreamClock); !errors.Is(e, group.ErrTimerName) {
				err = errors.Join(err, errors.New("a handler set the operator's timer"))
			}
		case 2:
			note(&seen, "operator "+op.StreamTime(c, kept).Sub(time.UnixMilli(base)).String())
		case 3:
			note(&seen, "partition "+c.StreamTime().Sub(time.UnixMilli(base)).String())
		case 4:
			op.CountLate(c)
		}
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	reg := prometheus.NewRegistry()
	wall := time.UnixMilli(base).Add(48 * time.Hour)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Registerer(reg), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	ping := func(key string, lat float64, after time.Duration) {
		tt.Consume(topicIn, key, &testpb.Ping{DeviceId: key, Lat: lat, DeviceTimeMs: base + after.Milliseconds()})
	}
	ping("a", 1, 0)
	ping("b", 0, 2*time.Minute) // stream time past both timers of a
	fireTimers(t, tt, proc)
	mu.Lock()
	slices.Sort(fired)
	if want := []string{"op:a:kit/test/op", "user:a:user"}; !slices.Equal(fired, want) {
		t.Errorf("fired %q, want %q", fired, want)
	}
	mu.Unlock()
	ping("c", 2, 3*time.Minute)
	ping("d", 3, 4*time.Minute)
	ping("e", 4, 5*time.Minute)
	mu.Lock()
	if want := []string{"operator 1h0m0s", "partition 1h0m0s"}; !slices.Equal(seen, want) {
		t.Errorf("stream times %q, want %q (the operator's kept time raises the partition's)", seen, want)
	}
	if err := errors.Join(errs...); err != nil {
		t.Error(err)
	}
	mu.Unlock()
	if n, _ := counterValue(t, reg, "fencestream_window_late_records_total", map[string]string{"group": testGroup, "windows": "op"}); n != 1 {
		t.Errorf("late records counted %v, want 1", n)
	}

	bad := group.New[state](timerTopology(1), testGroup, quiet)
	group.Output[testpb.Trigger](bad, topicOut)
	group.Stream(bad, topicIn, ignorePing)
	group.NewOperator(bad, "test", "op").Refuse(errors.New("spec refused on purpose"))
	if _, err := bad.Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t))); err == nil || !strings.Contains(err.Error(), "spec refused on purpose") {
		t.Errorf("a refused operator built: %v", err)
	}
}

// Operators whose names share a prefix ("op", "op2") each get their own
// timer: a timer is routed to the operator whose name it carries, exactly.
func TestOperatorTimersDoNotShareAPrefix(t *testing.T) {
	var (
		mu    sync.Mutex
		fired []string
	)
	tt := tester.New(t)
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Output[testpb.Trigger](g, topicOut)
	var ops []*group.Operator[state, *state]
	for _, name := range []string{"op", "op2", "op22", "o"} {
		op := group.NewOperator(g, "test", name)
		op.OnTimer(func(c *ctxT, tm group.Timer) error {
			mu.Lock()
			fired = append(fired, op.Name()+":"+tm.Name)
			mu.Unlock()
			return nil
		})
		ops = append(ops, op)
	}
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		var errs []error
		for _, op := range ops {
			errs = append(errs, op.SetTimer(c, c.EventTime(), group.StreamClock))
		}
		return errors.Join(errs...)
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	wall := time.UnixMilli(base).Add(48 * time.Hour)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	for i := range 20 {
		tt.Consume(topicIn, "a", &testpb.Ping{DeviceId: "a", DeviceTimeMs: base + int64(i)*1000})
		fireTimers(t, tt, proc)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range fired {
		name, timer, _ := strings.Cut(f, ":")
		if timer != "kit/test/"+name {
			t.Errorf("operator %s fired timer %s", name, timer)
		}
	}
	if len(fired) != 4*20 {
		t.Errorf("%d firings, want %d", len(fired), 4*20)
	}
}
