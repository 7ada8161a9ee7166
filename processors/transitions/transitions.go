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
	"github.com/fencestream/fencestream/processors/group/versioned"
	"github.com/fencestream/fencestream/processors/transitions/transitionspb"
	"github.com/fencestream/fencestream/topology"
)

// Names of the groups, their tables and routes.
const (
	Group      = "transitions"
	Table      = Group + "-table"
	Route      = "GET /v1/devices/{device}/transition"
	Pings      = "transitions-pings"
	PingsTable = Pings + "-table"
	PingsRoute = "GET /v1/devices/{device}/presence"
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
			{Name: PingsTable, Key: "device_id", Value: "fencestream.transitions.v1.PingPresence", Cleanup: topology.CleanupCompact,
				Doc: "each device's pings counted by its transitions as of each ping"},
			topology.TimersTopic(Pings, "device_id", 0),
		},
		Processors: []topology.Processor{
			{Group: Group, Doc: "keeps each device's transitions as a versioned table, answered as of a time"},
			{Group: Pings, Doc: "joins each ping with its device's transitions as of the ping's time: inside or outside a fence then"},
		},
	}
}

// Module is the processor as binaries host it.
func Module() host.Module {
	return host.Define(host.Module{
		Name:     Group,
		Declares: Declaration(),
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			return []group.Declarer{New(topo, nil), NewPings(topo, nil)}, nil
		},
		Run: func(ctx context.Context, env host.Env) error {
			g, p := New(env.Topology, env.Log), NewPings(env.Topology, env.Log)
			opts := append(env.Group, group.OnReady(env.Started))
			eg, ctx := errgroup.WithContext(ctx)
			eg.Go(func() error { return g.Run(ctx, env.Cluster, opts...) })
			eg.Go(func() error { return p.Run(ctx, env.Cluster, opts...) })
			return eg.Wait()
		},
		Routes: []host.Route{host.ViewRoute(Route, Table, serve), host.ViewRoute(PingsRoute, PingsTable, servePresence)},
	})
}

// Set is where a device's versions are in its state: the state is the set.
func Set(st *kitpb.VersionSet) *kitpb.VersionSet { return st }

// New defines the group over topo, which must include Declaration.
func New(topo *topology.Topology, log *slog.Logger) *group.Group[kitpb.VersionSet, *kitpb.VersionSet] {
	g := group.New[kitpb.VersionSet](topo, Group, log)
	versions := versioned.NewTable[geofencepb.Trigger](g, "transitions", versioned.Spec{History: History, MaxVersions: MaxVersions}, Set)
	group.Stream(g, geofence.TopicTriggers, func(c *Context, t *geofencepb.Trigger) error {
		if t.GetDeviceId() != c.Key() || t.GetEventTimeMs() <= 0 {
			return fmt.Errorf("trigger of device %q at %d ms under key %q", t.GetDeviceId(), t.GetEventTimeMs(), c.Key())
		}
		if t.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_CROSS {
			// A crossing between two fixes leaves the device where it was
			// (outside): it is no transition, and as a version it would
			// hide the one it follows.
			return nil
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

// PingsContext is the pings group's handler context.
type PingsContext = group.Context[transitionspb.PingPresence, *transitionspb.PingPresence]

// NewPings defines the group that joins each ping with its device's
// transitions as of the ping's device time (a stream-table join on a
// versioned table, KIP-914): a ping that arrives after the device's next
// transition still counts where the device was when it sent it. Pings are
// co-partitioned with the transitions table (both keyed by device_id).
func NewPings(topo *topology.Topology, log *slog.Logger) *group.Group[transitionspb.PingPresence, *transitionspb.PingPresence] {
	g := group.New[transitionspb.PingPresence](topo, Pings, log)
	transitionAt := versioned.Join[geofencepb.Trigger](g, Table, Set)
	group.Stream(g, geofence.TopicPings, func(c *PingsContext, p *geofencepb.Ping) error {
		if p.GetDeviceId() != c.Key() || p.GetDeviceTimeMs() <= 0 {
			return fmt.Errorf("ping of device %q at %d ms under key %q", p.GetDeviceId(), p.GetDeviceTimeMs(), c.Key())
		}
		st := c.State()
		if st == nil {
			st = &transitionspb.PingPresence{}
		}
		err := transitionAt.Left(c, time.UnixMilli(p.GetDeviceTimeMs()), func(v versioned.Version[geofencepb.Trigger, *geofencepb.Trigger]) error {
			switch {
			case v.Beyond:
				st.Unknown++
			case v.Found() && v.Value.GetType() != geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
				st.Inside++
				st.LastFence, st.LastInsideMs = v.Value.GetFenceId(), p.GetDeviceTimeMs()
			default:
				st.Outside++
			}
			return nil
		})
		if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	})
	group.StateTTL(g, History)
	return g
}

func servePresence(v *group.View[transitionspb.PingPresence, *transitionspb.PingPresence], w http.ResponseWriter, r *http.Request) {
	device := r.PathValue("device")
	st, err := v.Get(device)
	if err != nil {
		host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if st == nil {
		host.WriteError(w, http.StatusNotFound, "no pings from device "+device)
		return
	}
	host.WriteJSON(w, http.StatusOK, map[string]any{"device": device, "inside": st.GetInside(), "outside": st.GetOutside(), "unknown": st.GetUnknown(), "last_fence": st.GetLastFence()})
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
	ver, err := versioned.AsOf[geofencepb.Trigger](Set(st), at)
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
