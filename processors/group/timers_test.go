package group_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

var topicTimers = topology.TimersTopicName(testGroup)

// timerTopology is the test topology with the group's timer topic declared.
func timerTopology(partitions int32) *topology.Topology {
	topo := testTopology(partitions)
	topo.Topics = append(topo.Topics, topology.TimersTopic(testGroup, "device_id", partitions))
	p := &topo.Processors[0]
	p.Timers = topicTimers
	p.Flows = append(p.Flows, topology.Flow{From: topicTimers, To: topicTab}, topology.Flow{From: topicTimers, To: topicOut})
	return topo
}

// tableOf is topo with its table topic declared to hold value (the state
// type the test's group keeps; the build refuses any other).
func tableOf(topo *topology.Topology, value string) *topology.Topology {
	for i := range topo.Topics {
		if topo.Topics[i].Name == topicTab {
			topo.Topics[i].Value = value
		}
	}
	return topo
}

// windowTopology is timerTopology(1) for a group whose state is a WindowSet.
func windowTopology() *topology.Topology {
	return tableOf(timerTopology(1), "fencestream.kit.v1.WindowSet")
}

const base = int64(1_800_000_000_000)

// timerHarness: every ping (Hlc = event time) sets stream timer "silence" one
// minute after its event time; a ping with Lat 1 also sets wall timer "wall" at
// base + 1h, and Lat 2 sets timers "b" and "a" due at the same stream time as
// "silence" ... in reverse order. Each firing emits a Trigger stamped with the
// timer's due time, so outputs show what fired and when it says it happened.
type timerHarness struct {
	tt   *tester.Tester
	proc *group.Processor
	out  *tester.QueueTracker
	mu   sync.Mutex
	wall time.Time
	errs []error
}

func newTimerHarness(t *testing.T, opts ...group.Opt) *timerHarness {
	t.Helper()
	h := buildTimerHarness(t, opts...)
	h.run(t)
	return h
}

// run starts the harness's processor (a table seeded before is what its
// partition recovers).
func (h *timerHarness) run(t *testing.T) {
	t.Helper()
	runUntilCleanup(t, h.proc.Run)
	h.out = h.tt.NewQueueTracker(topicOut)
}

func buildTimerHarness(t *testing.T, opts ...group.Opt) *timerHarness {
	t.Helper()
	h := &timerHarness{tt: tester.New(t), wall: time.UnixMilli(base)}
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		at := c.EventTime().Add(time.Minute)
		err := c.SetTimer("silence", at, group.StreamClock)
		switch p.GetLat() {
		case 1:
			err = errors.Join(err, c.SetTimer("wall", time.UnixMilli(base).Add(time.Hour), group.WallClock))
		case 2:
			err = errors.Join(err, c.SetTimer("b", at.Add(-time.Second), group.StreamClock), c.SetTimer("a", at.Add(-2*time.Second), group.StreamClock))
		case 3:
			c.CancelTimer("silence")
		case 4:
			err = errors.Join(err, c.SetTimer("", at, group.StreamClock))
		case 5:
			err = errors.Join(err, c.SetTimer("kit/ttl", at, group.StreamClock))
		}
		h.mu.Lock()
		h.errs = append(h.errs, err)
		h.mu.Unlock()
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	fired := group.Output[testpb.Trigger](g, topicOut)
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
		st := c.State()
		if st == nil {
			st = &state{}
		}
		st.Pings++ // counts firings, to show the state is stored with them
		c.SetState(st)
		fired.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name, EventTimeMs: tm.At.UnixMilli()})
		return nil
	})
	opts = append(opts, group.Tester(h.tt), group.Clock(func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.wall }))
	proc, err := g.Processor(context.Background(), cluster.Config{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.proc = proc
	return h
}

func (h *timerHarness) ping(key string, lat float64, eventMs int64) {
	h.tt.Consume(topicIn, key, &testpb.Ping{DeviceId: key, Lat: lat, DeviceTimeMs: eventMs})
}

func (h *timerHarness) setWall(t time.Time) { h.mu.Lock(); h.wall = t; h.mu.Unlock() }

// fire looks for due timers and lets the ticks run; it returns what fired as
// "key/timer@ms-after-base".
func (h *timerHarness) fire(t *testing.T) []string {
	t.Helper()
	fireTimers(t, h.tt, h.proc)
	var got []string
	for {
		k, v, ok := h.out.Next()
		if !ok {
			return got
		}
		tr := v.(*testpb.Trigger)
		got = append(got, k+"/"+tr.GetFenceId()+"@"+time.Duration((tr.GetEventTimeMs()-base)*int64(time.Millisecond)).String())
	}
}

func TestStreamTimerFiresWhenStreamTimePassesIt(t *testing.T) {
	h := newTimerHarness(t)
	h.ping("d1", 0, base)
	// The wall clock is irrelevant to a stream timer: hours later, stream
	// time is still the last event (base), so nothing is due.
	h.setWall(time.UnixMilli(base).Add(3 * time.Hour))
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("fired before stream time reached the timer: %v", got)
	}
	// Another key on the same partition moves stream time to base+59s: still early.
	h.ping("d2", 0, base+59_000)
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	// base+61s passes d1's timer (base+60s) but not d2's (base+119s).
	h.ping("d3", 0, base+61_000)
	got := h.fire(t)
	if strings.Join(got, ",") != "d1/silence@1m0s" {
		t.Fatalf("fired %v, want d1's silence timer stamped at its due time", got)
	}
	if st := h.state(t, "d1"); st.GetPings() != 1 {
		t.Fatalf("state set by the timer handler not stored: %v", st)
	}
	// Fired timers are gone: looking again fires nothing.
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("fired twice: %v", got)
	}
	// A tick redelivered for d1 (or sent twice) finds nothing due.
	h.tt.Consume(topicTimers, "d1", &kitpb.Tick{StreamMs: base + 61_000, WallMs: base})
	if k, v, ok := h.out.Next(); ok {
		t.Fatalf("a second tick fired again: %s %v", k, v)
	}
}

func TestTimersFireInDueOrderAndCancel(t *testing.T) {
	h := newTimerHarness(t)
	h.ping("d1", 2, base) // silence@60s, b@59s, a@58s
	h.ping("d2", 0, base)
	h.ping("d2", 3, base+1) // cancels d2's silence timer
	h.setWall(time.UnixMilli(base).Add(time.Hour))
	h.ping("d9", 0, base+10*60_000)
	got := h.fire(t)
	if want := "d1/a@58s,d1/b@59s,d1/silence@1m0s"; strings.Join(got, ",") != want {
		t.Fatalf("fired %v, want %s (due order; d2's cancelled)", got, want)
	}
}

func TestWallTimerFiresOnInjectedClock(t *testing.T) {
	h := newTimerHarness(t)
	h.ping("d1", 1, base) // wall@1h, silence@60s (stream)
	h.setWall(time.UnixMilli(base).Add(59 * time.Minute))
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	h.setWall(time.UnixMilli(base).Add(61 * time.Minute))
	if got := h.fire(t); strings.Join(got, ",") != "d1/wall@1h0m0s" {
		t.Fatalf("fired %v, want only the wall timer (stream time has not moved)", got)
	}
}

// An idle partition's stream time follows the wall clock once configured:
// how the debouncer times out devices when all of a partition's devices fell
// silent.
func TestIdleStreamTimeAdvancesToWallClock(t *testing.T) {
	h := newTimerHarness(t, group.IdleStreamTime(5*time.Minute))
	h.ping("d1", 0, base)
	h.setWall(time.UnixMilli(base).Add(4 * time.Minute))
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("partition not idle long enough, yet fired: %v", got)
	}
	h.setWall(time.UnixMilli(base).Add(6 * time.Minute))
	if got := h.fire(t); strings.Join(got, ",") != "d1/silence@1m0s" {
		t.Fatalf("fired %v, want d1's silence stamped at its due time, not the wall clock", got)
	}
}

// Event time ahead of the wall clock moves stream time only to the wall clock:
// one fast device clock cannot fire its partition's timers early.
func TestFutureEventTimeDoesNotRushStreamTime(t *testing.T) {
	h := newTimerHarness(t)
	h.ping("d1", 0, base)
	h.ping("d2", 0, base+time.Hour.Milliseconds()) // wall clock is base
	if got := h.fire(t); len(got) != 0 {
		t.Fatalf("a future event time fired timers: %v", got)
	}
}

func TestTimersAreBoundedPerKey(t *testing.T) {
	h := newTimerHarness(t, group.MaxTimers(2))
	h.ping("d1", 2, base) // silence, b: stored; a: refused
	h.mu.Lock()
	err := h.errs[len(h.errs)-1]
	h.mu.Unlock()
	if !errors.Is(err, group.ErrTooManyTimers) {
		t.Fatalf("third timer: err %v, want ErrTooManyTimers", err)
	}
}

// A refused timer name's error says what names are allowed and why (go doc
// and the error used to say only "bad timer name").
func TestTimerNameErrorNamesTheRule(t *testing.T) {
	h := newTimerHarness(t)
	last := func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.errs[len(h.errs)-1]
	}
	for _, c := range []struct {
		lat  float64
		want []string
	}{
		{4, []string{`want a non-empty name not starting with "kit/"`, "the name is empty"}},
		{5, []string{`want a non-empty name not starting with "kit/"`, `"kit/ttl" starts with "kit/"`, "the kit keeps for the timers of its windows", "never reach OnTimer"}},
	} {
		h.ping("d1", c.lat, base)
		err := last()
		if !errors.Is(err, group.ErrTimerName) {
			t.Fatalf("lat %v: err %v, want ErrTimerName", c.lat, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
	// The refused name set nothing: only the handler's own timer fires.
	h.setWall(time.UnixMilli(base).Add(time.Hour))
	h.ping("d2", 0, base+10*60_000)
	if got := h.fire(t); strings.Join(got, ",") != "d1/silence@1m0s" {
		t.Fatalf("fired %v, want only d1's silence timer", got)
	}
}

func TestTimersNeedDeclaredTopic(t *testing.T) {
	g := group.New[state](testTopology(1), testGroup, quiet)
	group.Stream(g, topicIn, ignorePing)
	group.Output[testpb.Trigger](g, topicOut)
	group.OnTimer(g, func(*ctxT, group.Timer) error { return nil })
	if _, err := g.Graph(); err == nil || !strings.Contains(err.Error(), "no timer topic") {
		t.Fatalf("graph without a declared timer topic: %v", err)
	}
	topo := timerTopology(1)
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "timers (kit-owned") || !strings.Contains(d, topicTimers+" [device_id] -> "+topicTab) {
		t.Fatalf("describe does not show the timer topic:\n%s", d)
	}
	topo.Processors[0].Timers = "other-timers"
	if err := topo.Validate(); err == nil {
		t.Fatal("a misnamed timer topic validated")
	}
}

// fireTimers looks for due timers once and lets the ticks run.
func fireTimers(t *testing.T, tt *tester.Tester, proc *group.Processor) {
	t.Helper()
	if err := proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	tt.Catchup()
}

func (h *timerHarness) state(t *testing.T, key string) *state {
	t.Helper()
	st, err := group.StateOf[state](h.tt.TableValue(topicTab, key))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// BenchmarkTimerLook measures one look for due timers (FireTimers) over
// 10,000 keys whose timers are not due (Goka's tester). The look reads the
// due-time index only, so ns/key falls as keys grow; BenchmarkFireTimers has
// the figures at 1,000,000 keys.
func BenchmarkTimerLook(b *testing.B) {
	const keys = 10_000
	tt := tester.New(b)
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		return c.SetTimer("t", c.EventTime().Add(time.Hour), group.StreamClock)
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	group.Output[testpb.Trigger](g, topicOut)
	group.OnTimer(g, func(*ctxT, group.Timer) error { return nil })
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return time.UnixMilli(base) }))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i := range keys {
		tt.Consume(topicIn, fmt.Sprintf("k%d", i), &testpb.Ping{DeviceTimeMs: base})
	}
	b.ResetTimer()
	for b.Loop() {
		if err := proc.FireTimers(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/key")
}

// Ticks do not count as activity: once idle, a partition's stream time keeps
// following the wall clock while its timers fire.
func TestIdlePartitionStaysIdleWhileTimersFire(t *testing.T) {
	h := newTimerHarness(t, group.IdleStreamTime(5*time.Minute))
	h.ping("d1", 0, base)           // silence at 00:01
	h.ping("d2", 0, base+11*60_000) // silence at 00:12 (its event time is ahead of the wall clock)
	h.setWall(time.UnixMilli(base).Add(10 * time.Minute))
	if got := h.fire(t); strings.Join(got, ",") != "d1/silence@1m0s" {
		t.Fatalf("fired %v", got)
	}
	// Three minutes after d1's tick: still idle since the last ping.
	h.setWall(time.UnixMilli(base).Add(13 * time.Minute))
	if got := h.fire(t); strings.Join(got, ",") != "d2/silence@12m0s" {
		t.Fatalf("fired %v: the tick of the last look made the partition look busy", got)
	}
}
