package devicestats

import (
	"context"
	"log/slog"
	"net/http"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology"
)

// Names of the processor's group and table.
const (
	Group = "devicestats"
	Table = Group + "-table"
	Route = "GET /v1/devicestats/{device}"
)

// Extension declares the processor: it reads pings, keeps a count per device
// and dead-letters what it cannot use.
var Extension = topology.Extension{
	Name: Group,
	Topics: []topology.Topic{{Name: Table, Key: "device_id", Value: "google.protobuf.UInt64Value", Cleanup: topology.CleanupCompact,
		Doc: "pings counted per device"}},
	Processors: []topology.Processor{{
		Group:   Group,
		Streams: []string{geofence.TopicPings},
		Emits:   []string{topology.TopicDeadLetter},
		Table:   Table,
		Flows: []topology.Flow{
			{From: geofence.TopicPings, To: Table},
			{From: geofence.TopicPings, To: topology.TopicDeadLetter},
		},
		Doc: "counts pings per device (an example processor built on the public kit)",
	}},
}

// Module is the processor as binaries host it: its declaration, its group
// and its route.
func Module() host.Module {
	return host.Define(host.Module{
		Name:     Group,
		Declares: Extension,
		Run: func(ctx context.Context, env host.Env) error {
			return New(env.Topology, env.Log).Run(ctx, env.Cluster, append(env.Group, group.OnReady(env.Started))...)
		},
		Routes: []host.Route{host.ViewRoute(Route, Table, serve)},
	})
}

type (
	state = wrapperspb.UInt64Value
	ctxT  = group.Context[wrapperspb.UInt64Value, *wrapperspb.UInt64Value]
)

// New defines the group over topo's declaration (which must include
// Extension: host.Compose with Module does that).
func New(topo *topology.Topology, log *slog.Logger) *group.Group[state, *state] {
	g := group.New[state](topo, Group, log)
	group.Stream(g, geofence.TopicPings, func(c *ctxT, _ *geofencepb.Ping) error {
		n := c.State()
		if n == nil {
			n = &state{}
		}
		n.Value++
		c.SetState(n)
		return nil
	})
	return g
}

func serve(v *group.View[state, *state], w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	n, err := v.Get(device)
	if err != nil {
		host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if n == nil {
		host.WriteError(w, http.StatusNotFound, "no pings from device "+device)
		return
	}
	host.WriteJSON(w, http.StatusOK, map[string]any{"device": device, "pings": n.GetValue()})
}
