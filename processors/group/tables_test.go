package group_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

func joinTopology() *topology.Topology {
	t := testTopology(2)
	t.Topics = append(t.Topics,
		topology.Topic{Name: "devices-table", Key: "device_id", Partitions: 2, Cleanup: topology.CleanupCompact},
		topology.Topic{Name: "fleet-table", Key: "fleet_id", Partitions: 3, Cleanup: topology.CleanupCompact},
	)
	t.Processors[0].Joins = []string{"devices-table"}
	t.Processors[0].Lookups = []string{"fleet-table"}
	return t
}

// Typed joins and lookups: the handler reads another group's table for its
// own key (co-partitioned) and for any key, as typed messages.
func TestJoinAndLookup(t *testing.T) {
	topo := joinTopology()
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	var joined, looked []string
	g := group.New[state](topo, testGroup, quiet)
	devices := group.Join[testpb.DeviceState](g, "devices-table")
	fleets := group.Lookup[testpb.Occupancy](g, "fleet-table")
	group.Output[testpb.Trigger](g, topicOut)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		d, err := devices.Get(c)
		if err != nil {
			return err
		}
		f, err := fleets.Get(c, "fleet-"+p.GetDeviceId())
		if err != nil {
			return err
		}
		joined = append(joined, d.GetDeviceId())
		looked = append(looked, f.GetFenceId())
		return nil
	})
	tt := tester.New(t)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	tt.SetTableValue(goka.Table("devices-table"), "d1", &testpb.DeviceState{DeviceId: "d1-state"})
	tt.SetTableValue(goka.Table("fleet-table"), "fleet-d1", &testpb.Occupancy{FenceId: "fleet-of-d1"})
	tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 1})
	tt.Consume(topicIn, "d2", &testpb.Ping{DeviceId: "d2", Hlc: 1}) // nothing in either table
	if strings.Join(joined, ",") != "d1-state," || strings.Join(looked, ",") != "fleet-of-d1," {
		t.Fatalf("joined %q, looked up %q", joined, looked)
	}

	// A join the declaration does not list is refused.
	g2 := validGroup(testTopology(2), ignorePing)
	group.Join[testpb.DeviceState](g2, "devices-table")
	if _, err := g2.Graph(); err == nil || !strings.Contains(err.Error(), "joined table devices-table is not declared") {
		t.Fatalf("undeclared join: %v", err)
	}
}
