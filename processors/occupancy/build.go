package occupancy

import (
	"context"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Processor builds the occupancy processor of g against a broker (topology
// check, state directory, pinned hasher, oldest offsets).
func Processor(ctx context.Context, g *Group, cl cluster.Config, opts ...group.Opt) (*group.Processor, error) {
	return g.Processor(ctx, cl, opts...)
}
