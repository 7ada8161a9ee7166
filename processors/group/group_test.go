package group_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Names of the test topology: one group "gt" reading pings-like records from
// gt-in, keeping DeviceState per key in gt-table and emitting to gt-out.
const (
	testGroup = "gt"
	topicIn   = "gt-in"
	topicOut  = "gt-out"
	topicTab  = "gt-table"
)

type (
	state = testpb.DeviceState
	ctxT  = group.Context[testpb.DeviceState, *testpb.DeviceState]
	grp   = group.Group[testpb.DeviceState, *testpb.DeviceState]
)

func testTopology(partitions int32) *topology.Topology {
	return &topology.Topology{
		Name: "grouptest",
		Topics: []topology.Topic{
			{Name: topicIn, Key: "device_id", Value: "fencestream.kit.test.v1.Ping", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: topicOut, Key: "device_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: topicTab, Key: "device_id", Value: "fencestream.kit.test.v1.DeviceState", Partitions: partitions, Cleanup: topology.CleanupCompact},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw", Partitions: partitions, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group:   testGroup,
			Streams: []string{topicIn},
			Emits:   []string{topicOut, topology.TopicDeadLetter},
			Table:   topicTab,
			Flows: []topology.Flow{
				{From: topicIn, To: topicTab},
				{From: topicIn, To: topicOut},
				{From: topicIn, To: topology.TopicDeadLetter},
			},
		}},
	}
}

var quiet = slog.New(slog.DiscardHandler)

func ignorePing(*ctxT, *testpb.Ping) error { return nil }

// outT is the test group's output handle.
type outT = group.Out[testpb.Trigger, *testpb.Trigger]

// validGroup builds the group exactly as the test topology declares it.
func validGroup(topo *topology.Topology, handle func(*ctxT, *testpb.Ping) error, opts ...group.StreamOpt[testpb.Ping, *testpb.Ping]) *grp {
	return validGroupOut(topo, func(_ outT, c *ctxT, p *testpb.Ping) error { return handle(c, p) }, opts...)
}

// validGroupOut is validGroup for a handler that emits: it is handed the
// output handle of the group being built (handles belong to one group).
func validGroupOut(topo *topology.Topology, handle func(outT, *ctxT, *testpb.Ping) error, opts ...group.StreamOpt[testpb.Ping, *testpb.Ping]) *grp {
	return validGroupOutLogged(topo, quiet, handle, opts...)
}

func validGroupOutLogged(topo *topology.Topology, log *slog.Logger, handle func(outT, *ctxT, *testpb.Ping) error, opts ...group.StreamOpt[testpb.Ping, *testpb.Ping]) *grp {
	g := group.New[state](topo, testGroup, log)
	out := group.Output[testpb.Trigger](g, topicOut)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error { return handle(out, c, p) }, opts...)
	return g
}

func TestTestTopologyIsValid(t *testing.T) {
	if err := testTopology(2).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestGraphMatchingDeclaration(t *testing.T) {
	g := validGroup(testTopology(2), ignorePing)
	if g.Name() != testGroup {
		t.Fatalf("Name() = %q", g.Name())
	}
	gg, err := g.Graph()
	if err != nil {
		t.Fatal(err)
	}
	if string(gg.Group()) != testGroup {
		t.Errorf("goka group %q", gg.Group())
	}
	if gg.GroupTable() == nil || gg.GroupTable().Topic() != topicTab {
		t.Errorf("group table %v, want %s", gg.GroupTable(), topicTab)
	}
	var inputs, outputs []string
	for _, e := range gg.InputStreams() {
		inputs = append(inputs, e.Topic())
	}
	for _, e := range gg.OutputStreams() {
		outputs = append(outputs, e.Topic())
	}
	if strings.Join(inputs, ",") != topicIn {
		t.Errorf("inputs %v", inputs)
	}
	// The dead-letter output comes from the declaration, without registering it.
	if len(outputs) != 2 || !contains(outputs, topicOut) || !contains(outputs, topology.TopicDeadLetter) {
		t.Errorf("outputs %v, want %s and %s", outputs, topicOut, topology.TopicDeadLetter)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestGraphRefusesMismatch(t *testing.T) {
	topo := testTopology(2)
	cases := []struct {
		name  string
		build func() *grp
		want  []string
	}{
		{
			"handler for an undeclared topic",
			func() *grp {
				g := validGroup(topo, ignorePing)
				group.Stream(g, "gt-sneaky", ignorePing)
				return g
			},
			[]string{"handler for gt-sneaky", "does not declare"},
		},
		{
			"declared stream without handler",
			func() *grp {
				g := group.New[state](topo, testGroup, nil)
				group.Output[testpb.Trigger](g, topicOut)
				return g
			},
			[]string{"declared stream input " + topicIn + " has no handler"},
		},
		{
			"undeclared output",
			func() *grp {
				g := validGroup(topo, ignorePing)
				group.Output[testpb.Trigger](g, "gt-elsewhere")
				return g
			},
			[]string{"output gt-elsewhere is not declared"},
		},
		{
			"declared output not registered",
			func() *grp {
				g := group.New[state](topo, testGroup, nil)
				group.Stream(g, topicIn, ignorePing)
				return g
			},
			[]string{"declared output " + topicOut + " is not registered"},
		},
		{
			"undeclared loop",
			func() *grp {
				g := validGroup(topo, ignorePing)
				group.Loop(g, ignorePing)
				return g
			},
			[]string{"loop registered=true"},
		},
		{
			"several problems are all reported",
			func() *grp {
				g := group.New[state](topo, testGroup, nil)
				group.Stream(g, "gt-a", ignorePing)
				group.Output[testpb.Trigger](g, "gt-b")
				return g
			},
			[]string{"gt-a", "gt-b", topicIn + " has no handler", topicOut + " is not registered"},
		},
		{
			"declaration without the dead-letter topic",
			func() *grp {
				t := testTopology(2)
				p := &t.Processors[0]
				p.Emits = []string{topicOut}
				p.Flows = p.Flows[:2]
				return validGroup(t, ignorePing)
			},
			[]string{"does not list the dead-letter topic deadletter under Emits", "add it"},
		},
		{
			"group not in the topology",
			func() *grp { return group.New[state](topo, "nobody", nil) },
			[]string{"group nobody", "not declared in topology grouptest"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.build()
			gg, err := g.Graph()
			if err == nil {
				t.Fatalf("Graph() accepted it: %v", gg)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			// Building a processor reports the same problem before touching a
			// broker or a state directory.
			_, perr := g.Processor(context.Background(), cluster.Config{Brokers: []string{"127.0.0.1:1"}}, group.StateDir(t.TempDir()))
			if perr == nil || perr.Error() != err.Error() {
				t.Errorf("Processor() = %v, want the Graph error %v", perr, err)
			}
		})
	}
}

func TestProcessorNeedsStateDir(t *testing.T) {
	g := validGroup(testTopology(2), ignorePing)
	_, err := g.Processor(context.Background(), cluster.Config{Brokers: []string{"127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "state directory is required") || !strings.Contains(err.Error(), testGroup) {
		t.Fatalf("Processor without StateDir: %v", err)
	}
	// Bad cluster settings are reported before any connection.
	_, err = g.Processor(context.Background(), cluster.Config{}, group.StateDir(t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "no brokers") {
		t.Fatalf("Processor without brokers: %v", err)
	}
	if errors.Is(err, group.ErrStateMismatch) {
		t.Fatal("a config error reported as a state mismatch")
	}
}
