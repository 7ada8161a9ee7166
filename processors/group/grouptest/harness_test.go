package grouptest_test

import (
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
)

const (
	in, out, table = "hx-in", "hx-out", "hx-table"
	partitions     = 4
)

type ctxT = group.Context[testpb.DeviceState, *testpb.DeviceState]

func topo() *topology.Topology { return oneGroup() }

// twoGroups is topo plus group hy, which counts the triggers hx emits.
func twoGroups() *topology.Topology {
	t := oneGroup()
	t.Topics = append(t.Topics, topology.Topic{Name: "hy-table", Key: "device_id", Partitions: partitions, Cleanup: topology.CleanupCompact})
	t.Processors = append(t.Processors, topology.Processor{Group: "hy", Streams: []string{out}, Emits: []string{topology.TopicDeadLetter}, Table: "hy-table"})
	return t
}

func oneGroup() *topology.Topology {
	return &topology.Topology{
		Name: "harness",
		Topics: []topology.Topic{
			{Name: in, Key: "device_id", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: out, Key: "device_id", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: table, Key: "device_id", Partitions: partitions, Cleanup: topology.CleanupCompact},
			topology.TimersTopic("hx", "device_id", partitions),
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: partitions, Cleanup: topology.CleanupDelete},
		},
		// No Flows: derived from the edges.
		Processors: []topology.Processor{{Group: "hx", Streams: []string{in}, Emits: []string{out, topology.TopicDeadLetter},
			Table: table, Timers: topology.TimersTopicName("hx")}},
	}
}

// counter counts pings per device and, one minute of stream time after a
// device's last ping, emits its count; a ping whose device id is not valid
// UTF-8 makes its state unencodable, which stops the processor.
func counter() *group.Group[testpb.DeviceState, *testpb.DeviceState] {
	return counterOn(topo())
}

func counterOn(t *topology.Topology) *group.Group[testpb.DeviceState, *testpb.DeviceState] {
	g := group.New[testpb.DeviceState](t, "hx", nil)
	o := group.Output[testpb.Trigger](g, out)
	group.Stream(g, in, func(c *ctxT, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &testpb.DeviceState{DeviceId: p.GetDeviceId()}
		}
		st.Pings++
		if p.GetDeviceId() == "bad" {
			st.DeviceId = "\xff"
		}
		c.SetState(st)
		return c.SetTimer("quiet", c.EventTime().Add(time.Minute), group.StreamClock)
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
		o.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), EventTimeMs: tm.At.UnixMilli(), TriggerId: fmt.Sprint(c.State().GetPings())})
		return nil
	})
	return g
}

func TestHarness(t *testing.T) {
	base := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	h := grouptest.New(t, base.Add(time.Hour))
	h.Start(counter())
	key := grouptest.KeyOn("veh", 2, partitions)
	if topology.PartitionFor(key, partitions) != 2 {
		t.Fatalf("KeyOn gave %q, on partition %d", key, topology.PartitionFor(key, partitions))
	}
	for i := range 3 {
		h.Consume(in, key, &testpb.Ping{DeviceId: key, DeviceTimeMs: base.Add(time.Duration(i) * time.Second).UnixMilli()})
	}
	if st := grouptest.State[testpb.DeviceState](h, table, key); st.GetPings() != 3 {
		t.Fatalf("state %v, want 3 pings", st)
	}
	h.FireTimers()
	if got := grouptest.Drain[testpb.Trigger](h, out); len(got) != 0 {
		t.Fatalf("fired before stream time reached the timer: %v", got)
	}
	// Another key on the same partition moves its stream time past the timer.
	other := grouptest.KeyOn("car", 2, partitions)
	h.Consume(in, other, &testpb.Ping{DeviceId: other, DeviceTimeMs: base.Add(5 * time.Minute).UnixMilli()})
	h.Advance(time.Minute)
	h.FireTimers()
	got := grouptest.Drain[testpb.Trigger](h, out)
	if len(got) != 1 || got[0].Key != key || got[0].Value.GetTriggerId() != "3" || got[0].Value.GetEventTimeMs() != base.Add(2*time.Second+time.Minute).UnixMilli() {
		t.Fatalf("drained %+v, want one trigger for %s with count 3 at its timer", got, key)
	}
	if again := grouptest.Drain[testpb.Trigger](h, out); len(again) != 0 {
		t.Errorf("a second Drain returned %v", again)
	}
	h.Consume(in, "", &testpb.Ping{DeviceId: "x"})
	if dl := grouptest.DeadLetters(h); len(dl) != 1 || dl[0].Reason != deadletter.ReasonEmptyKey {
		t.Errorf("dead letters %+v, want one empty-key", dl)
	}
}

// The record cache (on by default) is not built on the tester, which commits
// nothing and so could never flush it: every write reaches the table at once,
// even with an interval far longer than the test.
func TestHarnessWritesThroughTheRecordCache(t *testing.T) {
	h := grouptest.New(t, time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC))
	h.Start(counter(), group.RecordCache(group.DefaultRecordCache), group.CommitInterval(time.Hour))
	h.Consume(in, "veh", &testpb.Ping{DeviceId: "veh"})
	h.Consume(in, "veh", &testpb.Ping{DeviceId: "veh"})
	if st := grouptest.State[testpb.DeviceState](h, table, "veh"); st.GetPings() != 2 {
		t.Fatalf("state %v, want 2 pings", st)
	}
}

// follower is group hy: it counts each device's triggers.
func follower(t *topology.Topology) *group.Group[testpb.DeviceState, *testpb.DeviceState] {
	g := group.New[testpb.DeviceState](t, "hy", nil)
	group.Stream(g, out, func(c *ctxT, tr *testpb.Trigger) error {
		st := c.State()
		if st == nil {
			st = &testpb.DeviceState{DeviceId: c.Key()}
		}
		st.Pings++
		c.SetState(st)
		return nil
	})
	return g
}

// Several groups run on one tester: what one emits the next consumes, and
// FireTimers fires the timers of those that have them (before: it failed the
// test on the group without timers).
func TestHarnessRunsSeveralGroups(t *testing.T) {
	base := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	h := grouptest.New(t, base.Add(time.Hour)) // stream time follows event time up to the wall clock
	tp := twoGroups()
	h.Start(counterOn(tp))
	h.Start(follower(tp))
	key, other := grouptest.KeyOn("veh", 1, partitions), grouptest.KeyOn("car", 1, partitions)
	h.Consume(in, key, &testpb.Ping{DeviceId: key, DeviceTimeMs: base.UnixMilli()})
	h.Consume(in, other, &testpb.Ping{DeviceId: other, DeviceTimeMs: base.Add(2 * time.Minute).UnixMilli()})
	h.FireTimers()
	if st := grouptest.State[testpb.DeviceState](h, "hy-table", key); st.GetPings() != 1 {
		t.Fatalf("hy state of %s: %v, want the one trigger hx emitted", key, st)
	}
	if st := grouptest.State[testpb.DeviceState](h, "hy-table", other); st != nil {
		t.Errorf("hy state of %s: %v, whose timer is not due", other, st)
	}
}

// recorder is a testing.TB whose failures are recorded: Fatalf ends the
// goroutine it is called on, as testing's does.
type recorder struct {
	*testing.T
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Helper()                           {}

// A processor that stops fails the test at the next wait instead of hanging
// (Goka's tester alone waits for it forever).
func TestHarnessFailsWhenAProcessorStops(t *testing.T) {
	rec := &recorder{T: t}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		h := grouptest.New(rec, time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC))
		h.Start(counter())
		h.Consume(in, "bad", &testpb.Ping{DeviceId: "bad"}) // the state cannot be encoded: the processor fails
		h.Consume(in, "next", &testpb.Ping{DeviceId: "next"})
		rec.Errorf("the harness went on past a stopped processor")
	}()
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		t.Fatal("the harness hung on a stopped processor")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	all := strings.Join(rec.msgs, "\n")
	if !strings.Contains(all, "processor hx stopped") {
		t.Fatalf("failures %q, want one saying processor hx stopped", all)
	}
}
