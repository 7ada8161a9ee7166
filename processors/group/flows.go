package group

import (
	"errors"
	"fmt"

	"github.com/fencestream/fencestream/topology"
)

// ErrUndeclaredRekey: a handler wrote along a flow that changes the key
// without a declared Boundary.
var ErrUndeclaredRekey = errors.New("undeclared re-key")

// undeclaredRekeys lists, for every input the group reads and every topic it
// writes, the writes that would change the key without a Boundary.
// topology.Validate checks the flows a declaration lists (or derives); this is
// the same rule applied to what the handlers really do, so a re-key the
// declaration leaves out cannot reach the broker: it is dead-lettered, naming
// the flow, at its first record.
func undeclaredRekeys(topo *topology.Topology, decl topology.Processor) map[string]error {
	inputs := append([]string(nil), decl.Streams...)
	writes := append([]string(nil), decl.Emits...)
	if decl.Loop != "" {
		inputs = append(inputs, decl.Loop)
		writes = append(writes, decl.Loop)
	}
	if decl.Timers != "" {
		inputs = append(inputs, decl.Timers)
	}
	out := map[string]error{}
	for _, in := range inputs {
		from, ok := topo.Topic(in)
		if !ok {
			continue
		}
		for _, w := range writes {
			to, ok := topo.Topic(w)
			if !ok || to.Key == topology.KeyOriginal || topology.Metadata(w) || to.Key == from.Key {
				continue
			}
			if _, ok := topo.Boundary(decl.Group, in, w); ok {
				continue
			}
			out[in+"\x00"+w] = fmt.Errorf("%w: group %s wrote to %s (key %s) from %s (key %s), and the topology declares no Boundary for that flow; declare one saying what order survives and what is lost",
				ErrUndeclaredRekey, decl.Group, w, to.Key, in, from.Key)
		}
	}
	return out
}
