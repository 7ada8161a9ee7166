package host_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology"
)

type (
	count    = wrapperspb.UInt64Value
	countCtx = group.Context[count, *count]
)

// rekeying is a module whose group reads device-keyed pings and loops them
// by fence: its edges are derived from the handlers, and only boundaries
// (if any) are written by hand.
func rekeying(bounds []topology.Boundary, declares []topology.Processor) host.Module {
	const v = "google.protobuf.UInt64Value"
	return host.Define(host.Module{
		Name: "rekey",
		Declares: topology.Extension{
			Topics: []topology.Topic{
				{Name: "pings", Key: "device_id", Value: v, Cleanup: topology.CleanupDelete},
				{Name: "rekey-loop", Key: "fence_id", Value: v, Cleanup: topology.CleanupDelete},
				{Name: "rekey-table", Key: "fence_id", Value: v, Cleanup: topology.CleanupCompact},
				{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw bytes", Cleanup: topology.CleanupDelete},
			},
			Processors: declares,
			Boundaries: bounds,
		},
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			g := group.New[count](topo, "rekey", nil)
			byFence := group.Loop(g, func(c *countCtx, m *count) error { return nil })
			group.Stream(g, "pings", func(c *countCtx, m *count) error { byFence.Send(c, "fence-1", m); return nil })
			return []group.Declarer{g}, nil
		},
	})
}

// A group's edges come from its handlers: the composed topology declares the
// stream, loop, table and dead-letter output no one wrote down, and a key
// change between the stream and the loop with no Boundary is refused before
// anything runs.
func TestDerivedDeclarationRefusesAnUndeclaredRekey(t *testing.T) {
	base := &topology.Topology{Name: "t", KeyedPartitions: 6}
	_, err := host.Compose(base, rekeying(nil, nil))
	if err == nil {
		t.Fatal("a derived re-key from pings (device_id) to rekey-loop (fence_id) without a Boundary was accepted")
	}
	if !strings.Contains(err.Error(), "pings") || !strings.Contains(err.Error(), "rekey-loop") {
		t.Errorf("the refusal does not name the flow: %v", err)
	}
	bound := []topology.Boundary{{Processor: "rekey", From: "pings", To: "rekey-loop", Preserved: "per-device order", Lost: "order across devices", Lag: "one hop"}}
	got, err := host.Compose(base, rekeying(bound, []topology.Processor{{Group: "rekey", Doc: "re-keys pings by fence"}}))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := got.Processor("rekey")
	if !ok {
		t.Fatal("the derived processor is not in the composed topology")
	}
	if strings.Join(p.Streams, ",") != "pings" || p.Loop != "rekey-loop" || p.Table != "rekey-table" ||
		strings.Join(p.Emits, ",") != topology.TopicDeadLetter || p.Doc != "re-keys pings by fence" {
		t.Errorf("derived declaration %+v", p)
	}
	// Edges written by hand next to derived ones would be said twice.
	_, err = host.Compose(base, rekeying(bound, []topology.Processor{{Group: "rekey", Streams: []string{"pings"}}}))
	if err == nil || !strings.Contains(err.Error(), "edges are derived from its handlers") {
		t.Errorf("hand-written edges of a derived group: got %v", err)
	}
}
