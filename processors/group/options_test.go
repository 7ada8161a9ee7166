package group_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Every option that cannot work is refused when the processor is built, with
// an error naming the option (before: Storage("bogus") and ProducerFlush(-1)
// were accepted under the tester, Now(nil) and Registerer(nil) panicked
// later, and the messages did not name the option).
func TestOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		opt  group.Opt
		want string
	}{
		{group.TimerBatch(0), "TimerBatch: must be at least 1, got 0"},
		{group.TimerInterval(-time.Second), "TimerInterval: must be positive, got -1s"},
		{group.IdleStreamTime(-time.Second), "IdleStreamTime: must not be negative"},
		{group.ReplayWindow(0), "ReplayWindow: must be at least 1"},
		{group.MaxTimers(0), "MaxTimers: must be at least 1"},
		{group.MaxClockSkew(0), "MaxClockSkew: must be positive"},
		{group.Storage("bogus"), `Storage: unknown storage "bogus"`},
		{group.ProducerFlush(-time.Millisecond), "ProducerFlush: must not be negative"},
		{group.RestartBackoff(0, time.Second), "RestartBackoff:"},
		{group.Registerer(nil), "Registerer: nil registerer"},
		{group.Now(nil), "Now: nil clock"},
		{group.RecordCache(-1), "RecordCache: must not be negative"},
		{group.CommitInterval(0), "CommitInterval: must be positive"},
	} {
		_, err := validGroup(testTopology(1), ignorePing).Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)), tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "group "+testGroup) {
			t.Errorf("want an error containing %q, got %v", tc.want, err)
		}
	}
	// Several bad options are reported together.
	_, err := validGroup(testTopology(1), ignorePing).Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)), group.TimerBatch(0), group.MaxTimers(0))
	if err == nil || !strings.Contains(err.Error(), "TimerBatch") || !strings.Contains(err.Error(), "MaxTimers") {
		t.Errorf("two bad options: %v", err)
	}
	// Storage("") keeps the default, as it always has.
	if _, err := validGroup(testTopology(1), ignorePing).Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)), group.Storage("")); err != nil {
		t.Errorf("Storage(\"\"): %v", err)
	}
	// A stream option given a nil function is refused at build too.
	g := validGroup(testTopology(1), ignorePing, group.OrderedByHLC[testpb.Ping](nil))
	if _, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t))); err == nil || !strings.Contains(err.Error(), "OrderedByHLC: nil function") {
		t.Errorf("OrderedByHLC(nil): %v", err)
	}
}

// One Opt type serves New and Processor: the options of New are checked
// there together, and an option given at the other place is refused when
// the group is built, naming it and where it belongs.
func TestOptionsOfNewAndAtTheWrongPlace(t *testing.T) {
	build := func(newOpts []group.Opt, runOpts ...group.Opt) error {
		g := group.New[state](timerTopology(1), testGroup, quiet, newOpts...)
		group.Output[testpb.Trigger](g, topicOut)
		group.Stream(g, topicIn, ignorePing)
		_, err := g.Processor(context.Background(), cluster.Config{}, append([]group.Opt{group.Tester(tester.New(t))}, runOpts...)...)
		return err
	}
	for _, tc := range []struct {
		name    string
		newOpts []group.Opt
		runOpts []group.Opt
		want    []string
	}{
		{"bad options of New, together", []group.Opt{group.StateTTL(0), group.CacheStates(-1), group.CacheEnvelopes(-1)}, nil,
			[]string{"group " + testGroup, "StateTTL: must be positive, got 0s", "CacheStates: must not be negative, got -1", "CacheEnvelopes: must not be negative, got -1"}},
		{"a run option given to New", []group.Opt{group.StateDir("x"), group.ReplayWindow(0)}, nil,
			[]string{"StateDir: an option of Processor or Run, given to New", "ReplayWindow: an option of Processor or Run, given to New"}},
		{"an option of New given to Processor", nil, []group.Opt{group.StateTTL(time.Hour), group.OrderedOutputs(true)},
			[]string{"StateTTL: an option of New, given to Processor or Run", "OrderedOutputs: an option of New, given to Processor or Run"}},
	} {
		err := build(tc.newOpts, tc.runOpts...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: want an error containing %q, got %v", tc.name, w, err)
			}
		}
	}
	if err := build([]group.Opt{group.StateTTL(time.Hour), group.CacheEnvelopes(1 << 20), group.CacheStates(1 << 20), group.OrderedOutputs(true), group.OnDeadLetter(func(string, string) {})}, group.ReplayWindow(4)); err != nil {
		t.Errorf("every option at its place: %v", err)
	}
}

const metricsGroup = "gt-metrics"

// metricsTopology declares metricsGroup (a group name no other test runs, so
// what it leaves on the default registry is its own) with timers.
func metricsTopology() *topology.Topology {
	tab, timers := metricsGroup+"-table", topology.TimersTopicName(metricsGroup)
	return &topology.Topology{
		Name: "grouptest-metrics",
		Topics: []topology.Topic{
			{Name: topicIn, Key: "device_id", Value: "fencestream.kit.test.v1.Ping", Partitions: 1, Cleanup: topology.CleanupDelete},
			{Name: topicOut, Key: "device_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: 1, Cleanup: topology.CleanupDelete},
			{Name: tab, Key: "device_id", Value: "fencestream.kit.test.v1.DeviceState", Partitions: 1, Cleanup: topology.CleanupCompact},
			topology.TimersTopic(metricsGroup, "device_id", 1),
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw", Partitions: 1, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group: metricsGroup, Streams: []string{topicIn}, Emits: []string{topicOut, topology.TopicDeadLetter},
			Table: tab, Timers: timers,
			Flows: []topology.Flow{
				{From: topicIn, To: tab}, {From: topicIn, To: topicOut}, {From: topicIn, To: topology.TopicDeadLetter},
				{From: timers, To: tab}, {From: timers, To: topicOut}, {From: timers, To: topology.TopicDeadLetter},
			},
		}},
	}
}

// wallTimerGroup: each ping sets the key's wall-clock timer "wall" at base +
// 1h; the timer emits a trigger.
func wallTimerGroup() *grp {
	g := group.New[state](metricsTopology(), metricsGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		c.SetState(&state{DeviceId: c.Key()})
		return c.SetTimer("wall", time.UnixMilli(base).Add(time.Hour), group.WallClock)
	})
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name})
		return nil
	})
	return g
}

// tbuild is one processor of a group on a tester of its own, with a clock of
// its own.
type tbuild struct {
	tt   *tester.Tester
	proc *group.Processor
	out  *tester.QueueTracker
	mu   sync.Mutex
	now  time.Time
}

func buildOn(t *testing.T, g *grp, opts ...group.Opt) *tbuild {
	t.Helper()
	b := &tbuild{tt: tester.New(t), now: time.UnixMilli(base)}
	opts = append([]group.Opt{group.Tester(b.tt), group.Now(func() time.Time { b.mu.Lock(); defer b.mu.Unlock(); return b.now })}, opts...)
	proc, err := g.Processor(context.Background(), cluster.Config{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b.proc = proc
	return b
}

func (b *tbuild) run(t *testing.T) {
	t.Helper()
	runUntilCleanup(t, b.proc.Run)
	b.out = b.tt.NewQueueTracker(topicOut)
}

func (b *tbuild) setNow(at time.Time) { b.mu.Lock(); b.now = at; b.mu.Unlock() }

// fired fires b's due timers and returns the names of the timers whose
// triggers came out.
func (b *tbuild) fired(t *testing.T) []string {
	t.Helper()
	if err := b.proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.tt.Catchup()
	var names []string
	for {
		_, v, ok := b.out.Next()
		if !ok {
			return names
		}
		names = append(names, v.(*testpb.Trigger).GetFenceId())
	}
}

// Building a group twice gives two independent processors: each has its own
// clock, stream time and timer index (before: Processor wrote its options and
// its timer index into the group, so the second build took over the first's
// index and clock, and the first's timers never fired).
func TestProcessorBuiltTwiceIsIndependent(t *testing.T) {
	g := wallTimerGroup()
	b1, b2 := buildOn(t, g, group.Registerer(prometheus.NewRegistry())), buildOn(t, g, group.Registerer(prometheus.NewRegistry()))
	b1.run(t)
	b2.run(t)
	b1.tt.Consume(topicIn, "k1", &testpb.Ping{DeviceId: "k1"})
	b2.tt.Consume(topicIn, "k2", &testpb.Ping{DeviceId: "k2"})
	// Only b1's clock reaches the timers.
	b1.setNow(time.UnixMilli(base).Add(2 * time.Hour))
	if got := b2.fired(t); len(got) != 0 {
		t.Fatalf("the second build fired %v by the first build's clock", got)
	}
	if got := b1.fired(t); len(got) != 1 || got[0] != "wall" {
		t.Fatalf("the first build fired %v, want its own wall timer", got)
	}
	if st := b1.proc.TimerStats(); st.Indexed != 0 {
		t.Errorf("first build's index holds %d keys after firing, want 0", st.Indexed)
	}
	if st := b2.proc.TimerStats(); st.Indexed != 1 {
		t.Errorf("second build's index holds %d keys, want its own 1", st.Indexed)
	}
	b2.setNow(time.UnixMilli(base).Add(2 * time.Hour))
	if got := b2.fired(t); len(got) != 1 || got[0] != "wall" {
		t.Fatalf("the second build fired %v, want its own wall timer", got)
	}
}

// counterValue is the value of the counter name{group=metricsGroup, labels...} in
// g, summed over the series that match; found false when there is none.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (v float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, want := range labels {
				if have[k] != want {
					continue series
				}
			}
			v += m.GetCounter().GetValue()
			found = true
		}
	}
	return v, found
}

// Every kit metric of a processor is registered on its Registerer, none on
// prometheus.DefaultRegisterer: two processors on two registries each count
// only their own timers (before: the timer and window metrics were promauto
// globals on the default registry, so neither registry had them and the
// default one counted both), and a third processor on one of the registries
// shares its collectors instead of failing.
func TestMetricsAreOnTheProcessorsRegisterer(t *testing.T) {
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	b1, b2 := buildOn(t, wallTimerGroup(), group.Registerer(reg1)), buildOn(t, wallTimerGroup(), group.Registerer(reg2))
	b1.run(t)
	b2.run(t)
	b1.tt.Consume(topicIn, "k1", &testpb.Ping{DeviceId: "k1"})
	b1.setNow(time.UnixMilli(base).Add(2 * time.Hour))
	if got := b1.fired(t); len(got) != 1 {
		t.Fatalf("fired %v, want one timer", got)
	}
	mine := map[string]string{"group": metricsGroup}
	for _, name := range []string{"fencestream_timers_fired_total", "fencestream_timer_ticks_sent_total"} {
		if v, _ := counterValue(t, reg1, name, mine); v != 1 {
			t.Errorf("%s on the first processor's registry = %v, want 1", name, v)
		}
		if v, found := counterValue(t, reg2, name, mine); v != 0 {
			t.Errorf("%s on the second processor's registry = %v (found %v), want 0", name, v, found)
		}
		if v, found := counterValue(t, prometheus.DefaultGatherer, name, mine); found {
			t.Errorf("%s{group=%s} is on the default registry (%v), which neither processor was given", name, metricsGroup, v)
		}
	}
	// Nothing of the group's at all on the default registry.
	mfs, _ := prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" && l.GetValue() == metricsGroup {
					t.Errorf("%s{group=%s} is on the default registry", mf.GetName(), metricsGroup)
				}
			}
		}
	}
	if v, _ := counterValue(t, reg1, "fencestream_records_processed_total", mine); v != 2 { // the ping and the tick
		t.Errorf("records processed on the first registry = %v, want 2", v)
	}
	// A second processor on reg1 shares its collectors.
	b3 := buildOn(t, wallTimerGroup(), group.Registerer(reg1))
	b3.run(t)
	b3.tt.Consume(topicIn, "k3", &testpb.Ping{DeviceId: "k3"})
	if v, _ := counterValue(t, reg1, "fencestream_records_processed_total", mine); v != 3 {
		t.Errorf("records processed on the shared registry = %v, want 3", v)
	}
}
