package visits

import (
	"context"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
)

// Name is the visits module's name.
const Name = "visits"

// Module is visits as binaries host it: Run builds its groups on the
// binary's options. The geofencing topology declares them.
func Module() host.Module {
	return host.Define(host.Module{Name: Name, Run: Run})
}

// Run builds the app's processors over env (checking the topology against
// the broker) and runs them until ctx ends; env.Started sees each once all
// are ready. A clean stop returns nil.
func Run(ctx context.Context, env host.Env) error {
	log := env.Logger()
	app, err := New(env.Topology, log, env.Registerer)
	if err != nil {
		return err
	}
	var procs []*group.Processor
	for _, g := range app.Groups() {
		p, err := g.Processor(ctx, env.Cluster, env.Group...)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	env.Log = log
	return host.RunProcessors(ctx, env, Name, nil, procs...)
}
