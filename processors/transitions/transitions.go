package transitions

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// Names of the group, its table and route.
const (
	Group = "transitions"
	Table = Group + "-table"
	Route = "GET /v1/devices/{device}/transition"
)

// Bounds (see the package doc).
const (
	History     = 7 * 24 * time.Hour
	MaxVersions = 256
)

// Context is the group's handler context: its state is the device's version
// set.
type Context = group.Context[kitpb.VersionSet, *kitpb.VersionSet]

// Declaration is what the module adds to the topology (partition count 0:
// the topology's keyed count, as fence-triggers).
func Declaration() topology.Extension {
	return topology.Extension{
		Topics: []topology.Topic{
			{Name: Table, Key: "device_id", Value: "fencestream.kit.v1.VersionSet", Cleanup: topology.CleanupCompact,
				Doc: "each device's confirmed transitions, versioned by event time"},
		},
		Processors: []topology.Processor{
			{Group: Group, Doc: "keeps each device's transitions as a versioned table, answered as of a time"},
		},
	}
}

// Module is the processor as binaries host it.
func Module() host.Module {
	return host.Define(host.Module{
		Name:     Group,
		Declares: Declaration(),
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			return []group.Declarer{New(topo, nil)}, nil
		},
		Run: func(ctx context.Context, env host.Env) error {
			g := New(env.Topology, env.Log)
			opts := append(env.Group, group.OnReady(env.Started))
			eg, ctx := errgroup.WithContext(ctx)
			eg.Go(func() error { return g.Run(ctx, env.Cluster, opts...) })
			return eg.Wait()
		},
		Routes: []host.Route{host.ViewRoute(Route, Table, serve)},
	})
}

// Set is where a device's versions are in its state: the state is the set.
func Set(st *kitpb.VersionSet) *kitpb.VersionSet { return st }

// New defines the group over topo, which must include Declaration.
func New(topo *topology.Topology, log *slog.Logger) *group.Group[kitpb.VersionSet, *kitpb.VersionSet] {
	g := group.New[kitpb.VersionSet](topo, Group, log)
	versions := group.NewVersionedTable[geofencepb.Trigger](g, "transitions", group.VersionSpec{History: History, MaxVersions: MaxVersions}, Set)
	group.Stream(g, geofence.TopicTriggers, func(c *Context, t *geofencepb.Trigger) error {
		if t.GetDeviceId() != c.Key() || t.GetEventTimeMs() <= 0 {
			return fmt.Errorf("trigger of device %q at %d ms under key %q", t.GetDeviceId(), t.GetEventTimeMs(), c.Key())
		}
		st := c.State()
		if st == nil {
			st = &kitpb.VersionSet{}
		}
		// An expired trigger is dropped and counted; its error dead-letters
		// the input (reason invalid). The set's counters changed: store it.
		err := versions.Put(c, st, c.EventTime(), t)
		c.SetState(st)
		return err
	}, group.EventTime(func(t *geofencepb.Trigger) time.Time { return time.UnixMilli(t.GetEventTimeMs()) }))
	return g
}

func serve(v *group.View[kitpb.VersionSet, *kitpb.VersionSet], w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	at := time.UnixMilli(1 << 50) // the latest
	if s := r.URL.Query().Get("at"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			host.WriteError(w, http.StatusBadRequest, "at: want RFC 3339, like 2027-01-15T08:40:00Z")
			return
		}
		at = t
	}
	st, err := v.Get(device)
	if err != nil {
		host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	ver, err := group.VersionAsOf[geofencepb.Trigger](Set(st), at)
	if err != nil {
		host.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	switch {
	case ver.Beyond:
		host.WriteError(w, http.StatusNotFound, "older than the history kept for device "+device)
		return
	case !ver.Found():
		host.WriteError(w, http.StatusNotFound, "no transition of device "+device+" by then")
		return
	}
	out := map[string]any{"device": device, "fence": ver.Value.GetFenceId(), "type": ver.Value.GetType().String(),
		"trigger_id": ver.Value.GetTriggerId(), "valid_from": ver.ValidFrom.UTC().Format(time.RFC3339Nano)}
	if !ver.ValidTo.IsZero() {
		out["valid_to"] = ver.ValidTo.UTC().Format(time.RFC3339Nano)
	}
	host.WriteJSON(w, http.StatusOK, out)
}
