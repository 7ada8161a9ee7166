package visits

import (
	"context"

	"github.com/fencestream/fencestream/processors/group/host"
)

// Name is the visits module's name.
const Name = "visits"

// Module is visits as binaries host it: Run builds both groups on the
// binary's options. The geofencing topology declares them.
func Module() host.Module {
	return host.Define(host.Module{Name: Name, Run: Run})
}

// Run builds both processors over env (checking the topology against the
// broker) and runs them until ctx ends; env.Started sees each once both are
// ready. A clean stop returns nil.
func Run(ctx context.Context, env host.Env) error {
	log := env.Logger()
	gs, err := New(env.Topology, log, env.Registerer)
	if err != nil {
		return err
	}
	vp, err := gs.Visits.Processor(ctx, env.Cluster, env.Group...)
	if err != nil {
		return err
	}
	sp, err := gs.Stats.Processor(ctx, env.Cluster, env.Group...)
	if err != nil {
		return err
	}
	env.Log = log
	return host.RunProcessors(ctx, env, Name, nil, vp, sp)
}
