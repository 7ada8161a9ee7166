package streams

import (
	"context"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology"
)

// Module hosts the app define describes as binaries host any processor
// (host.Compose, host.RunAll, the all-in-one): topics are the app's own
// (the sources it reads may come from the base topology); its groups'
// declarations are derived as for any kit group; its boundaries are the
// ones its re-keys name; its Describe is App.Describe, and the app's groups
// and operators drawn in the topology's Mermaid flowchart (what fencectl
// topology describe prints). Set Routes on the result to serve its tables.
func Module(name string, topics []topology.Topic, define func(b *Builder)) host.Module {
	return host.Define(host.Module{
		Name:     name,
		Declares: topology.Extension{Topics: topics, Boundaries: declaredBoundaries(name, topics, define)},
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			app, err := build(topo, name, nil, define)
			if err != nil {
				return nil, err
			}
			out := make([]group.Declarer, len(app.groups))
			for i, g := range app.groups {
				out[i] = g
			}
			return out, nil
		},
		Describe: func(topo *topology.Topology) (string, string, error) {
			app, err := build(topo, name, nil, define)
			if err != nil {
				return "", "", err
			}
			return app.Describe(), app.mermaidIn(), nil
		},
		Run: func(ctx context.Context, env host.Env) error {
			app, err := build(env.Topology, name, &env, define)
			if err != nil {
				return err
			}
			return app.Run(ctx, env.Cluster, append(env.Group, group.OnReady(env.Started))...)
		},
	})
}

func build(topo *topology.Topology, name string, env *host.Env, define func(b *Builder)) (*App, error) {
	b := New(topo, name, nil)
	if env != nil {
		b.log = env.Logger()
	}
	define(b)
	return b.Build()
}

// declaredBoundaries are the boundaries define's re-keys name, known
// before the base topology is: host.Compose adds them with the groups.
func declaredBoundaries(name string, topics []topology.Topic, define func(b *Builder)) []topology.Boundary {
	b := New(&topology.Topology{Name: name, Topics: topics}, name, nil)
	define(b)
	var out []topology.Boundary
	for _, n := range b.nodes {
		if n.term == nil || !n.term.rekey || n.term.boundary.Preserved+n.term.boundary.Lost == "" {
			continue
		}
		for _, r := range n.roots() {
			if r.table == nil {
				bd := n.term.boundary
				bd.Processor, bd.From, bd.To = name, r.topic, n.term.topic
				out = append(out, bd)
			}
		}
	}
	return out
}
