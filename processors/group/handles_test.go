package group_test

import (
	"context"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// A handler that uses a zero handle, another group's handle, or panics has
// its input dead-lettered with its own reason, its state change dropped, and
// the processor goes on with the next record (before: a zero or foreign Out
// panicked in Goka's callback and stopped the processor; under the tester
// Catchup then hung).
func TestMisusedHandlesAndPanicsAreDeadLettered(t *testing.T) {
	// A handle of another build of the same declaration: what a package-level
	// handle variable assigned in a constructor turns into once New runs twice.
	foreign := group.Output[testpb.Trigger](group.New[state](testTopology(2), testGroup, quiet), topicOut)
	var zero outT
	var zeroLoop group.LoopOut[testpb.Trigger, *testpb.Trigger]
	handle := func(out outT, c *ctxT, p *testpb.Ping) error {
		c.SetState(&state{DeviceId: c.Key(), Pings: 99})
		trig := &testpb.Trigger{DeviceId: c.Key(), Hlc: p.GetHlc()}
		switch c.Key() {
		case "zero":
			zero.Emit(c, c.Key(), trig)
		case "zero-loop":
			zeroLoop.Send(c, c.Key(), trig)
		case "foreign":
			foreign.Emit(c, c.Key(), trig)
		case "panic":
			var m map[string]int
			m["boom"]++ // a nil-map write: a runtime panic, as a bug would give
		default:
			out.Emit(c, c.Key(), trig)
		}
		return nil
	}
	tt := tester.New(t)
	proc, err := validGroupOut(testTopology(2), handle).Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	h := &harness{tt: tt, out: tt.NewQueueTracker(topicOut), dlq: tt.NewQueueTracker("deadletter")}

	for _, tc := range []struct{ key, reason, errPart string }{
		{"zero", deadletter.ReasonMisusedHandle, "zero Out"},
		{"zero-loop", deadletter.ReasonMisusedHandle, "zero LoopOut"},
		{"foreign", deadletter.ReasonMisusedHandle, "declared on another group"},
		{"panic", deadletter.ReasonPanic, "assignment to entry in nil map"},
	} {
		p := &testpb.Ping{DeviceId: tc.key, Hlc: 5}
		tt.Consume(topicIn, tc.key, p)
		checkDeadLetter(t, h.nextDeadLetter(t), tc.key, tc.reason, tc.errPart, p)
		h.noMore(t)
		if v := tt.TableValue(goka.Table(topicTab), tc.key); v != nil {
			if st, _ := group.StateOf[state](v); st != nil {
				t.Errorf("%s: the failed handler's state was stored: %v", tc.key, st)
			}
		}
	}
	// The processor goes on.
	tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 6})
	if k, _, ok := h.out.Next(); !ok || k != "d1" {
		t.Fatalf("after the failures: output %q %v", k, ok)
	}
	st, err := group.StateOf[state](tt.TableValue(goka.Table(topicTab), "d1"))
	if err != nil || st.GetPings() != 99 {
		t.Fatalf("d1 state %v, %v", st, err)
	}
}

// A handler that writes across a key change the declaration does not list
// (so Validate saw no flow to refuse) is refused at its first record:
// dead-lettered with reason undeclared-rekey, naming the flow, and nothing
// reaches the topic of the other key.
func TestUndeclaredRekeyIsRefused(t *testing.T) {
	topo := testTopology(2)
	topo.Topics = append(topo.Topics, topology.Topic{Name: "gt-by-fence", Key: "fence_id", Partitions: 2, Cleanup: topology.CleanupDelete})
	topo.Processors[0].Emits = append(topo.Processors[0].Emits, "gt-by-fence")
	if err := topo.Validate(); err != nil {
		t.Fatalf("the declaration lists no flow to gt-by-fence, so Validate has nothing to refuse: %v", err)
	}
	g := group.New[state](topo, testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	byFence := group.Output[testpb.Trigger](g, "gt-by-fence")
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		if c.Key() == "rekey" {
			byFence.Emit(c, "fence-1", &testpb.Trigger{DeviceId: c.Key()})
			return nil
		}
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key()})
		return nil
	})
	tt := tester.New(t)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	h := &harness{tt: tt, out: tt.NewQueueTracker(topicOut), dlq: tt.NewQueueTracker("deadletter")}
	fenced := tt.NewQueueTracker("gt-by-fence")
	p := &testpb.Ping{DeviceId: "rekey", Hlc: 1}
	tt.Consume(topicIn, "rekey", p)
	checkDeadLetter(t, h.nextDeadLetter(t), "rekey", deadletter.ReasonUndeclaredRekey, "gt-by-fence (key fence_id) from gt-in (key device_id)", p)
	if k, _, ok := fenced.Next(); ok {
		t.Errorf("the undeclared re-key reached gt-by-fence under %q", k)
	}
	tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 2})
	if k, _, ok := h.out.Next(); !ok || k != "d1" {
		t.Fatalf("same-key output after the refusal: %q %v", k, ok)
	}
}

// loopTopology is the test topology with a loop of UInt64Value records.
func loopTopology() *topology.Topology {
	topo := testTopology(2)
	loop := testGroup + "-loop"
	topo.Topics = append(topo.Topics, topology.Topic{Name: loop, Key: "device_id", Value: "google.protobuf.UInt64Value", Partitions: 2, Cleanup: topology.CleanupDelete})
	p := &topo.Processors[0]
	p.Loop = loop
	p.Flows = append(p.Flows, topology.Flow{From: topicIn, To: loop}, topology.Flow{From: loop, To: topicTab},
		topology.Flow{From: loop, To: topicOut}, topology.Flow{From: loop, To: topology.TopicDeadLetter})
	return topo
}

// buildable is a group of any state type.
type buildable interface {
	Graph() (*goka.GroupGraph, error)
	Processor(context.Context, cluster.Config, ...group.Opt) (*group.Processor, error)
}

// A handle or handler of another message type than the topology declares
// for its topic is refused when the group is built, naming it (before: it
// built, and the records were read as the wrong type — a Trigger loop handler
// fed UInt64Value records saw unknown fields, and nothing was dead-lettered).
func TestHandlesOfTheWrongTypeAreRefusedAtBuild(t *testing.T) {
	ignoreTrigger := func(*ctxT, *testpb.Trigger) error { return nil }
	for _, tc := range []struct {
		name  string
		build func() buildable
		want  []string
	}{
		{"output", func() buildable {
			g := group.New[state](testTopology(2), testGroup, quiet)
			group.Output[testpb.Ping](g, topicOut)
			group.Stream(g, topicIn, ignorePing)
			return g
		}, []string{"Output gt-out is typed fencestream.kit.test.v1.Ping, but the topology declares gt-out as fencestream.kit.test.v1.Trigger"}},
		{"two outputs of one topic", func() buildable {
			g := validGroup(testTopology(2), ignorePing)
			group.Output[testpb.Occupancy](g, topicOut)
			return g
		}, []string{"Output gt-out is typed fencestream.kit.test.v1.Occupancy, but Output gt-out of the same topic is typed fencestream.kit.test.v1.Trigger"}},
		{"stream handler", func() buildable {
			g := group.New[state](testTopology(2), testGroup, quiet)
			group.Output[testpb.Trigger](g, topicOut)
			group.Stream(g, topicIn, ignoreTrigger)
			return g
		}, []string{"Stream gt-in handler is typed fencestream.kit.test.v1.Trigger, but the topology declares gt-in as fencestream.kit.test.v1.Ping"}},
		{"loop handler", func() buildable {
			g := validGroup(loopTopology(), ignorePing)
			group.Loop(g, ignoreTrigger)
			return g
		}, []string{"Loop handler is typed fencestream.kit.test.v1.Trigger, but the topology declares gt-loop as google.protobuf.UInt64Value"}},
		{"table state", func() buildable {
			g := group.New[testpb.Occupancy](testTopology(2), testGroup, quiet)
			group.Output[testpb.Trigger](g, topicOut)
			group.Stream(g, topicIn, func(*group.Context[testpb.Occupancy, *testpb.Occupancy], *testpb.Ping) error { return nil })
			return g
		}, []string{"the group table's state is typed fencestream.kit.test.v1.Occupancy, but the topology declares gt-table as fencestream.kit.test.v1.DeviceState"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.build()
			_, gerr := g.Graph()
			_, perr := g.Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)))
			for _, err := range []error{gerr, perr} {
				for _, w := range tc.want {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("want an error containing %q, got %v", w, err)
					}
				}
			}
		})
	}
	// The same declaration with the right types builds.
	g := validGroup(loopTopology(), ignorePing)
	group.Loop(g, func(*ctxT, *wrapperspb.UInt64Value) error { return nil })
	if _, err := g.Graph(); err != nil {
		t.Fatalf("the well-typed loop group: %v", err)
	}
}

// A handle declared after the group's processor was built is not in that
// processor's graph: its first use is refused, naming why (before: it was
// used as if it had been declared before).
func TestHandleDeclaredAfterBuildIsRefusedAtUse(t *testing.T) {
	var late outT
	g := validGroupOut(testTopology(2), func(out outT, c *ctxT, p *testpb.Ping) error {
		if c.Key() == "late" {
			late.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key()})
			return nil
		}
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key()})
		return nil
	})
	tt := tester.New(t)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	late = group.Output[testpb.Trigger](g, topicOut)
	runUntilCleanup(t, proc.Run)
	h := &harness{tt: tt, out: tt.NewQueueTracker(topicOut), dlq: tt.NewQueueTracker("deadletter")}
	p := &testpb.Ping{DeviceId: "late"}
	tt.Consume(topicIn, "late", p)
	checkDeadLetter(t, h.nextDeadLetter(t), "late", deadletter.ReasonMisusedHandle, "declared after its processor was built", p)
	h.noMore(t)
}
