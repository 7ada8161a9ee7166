package devicestats

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fencestream/fencestream/processors/devicestats/devicestatspb"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// Names of the groups, their topics and routes.
const (
	Group      = "devicestats"
	Table      = Group + "-table"
	TopicHours = "device-hours"
	Fleet      = "fleetstats"
	FleetLoop  = Fleet + "-loop"
	FleetTable = Fleet + "-table"
	Route      = "GET /v1/devicestats/{device}"
	FleetRoute = "GET /v1/fleetstats/{hour}"
	// HourFormat is how an hour is written as the fleet key (UTC).
	HourFormat = "2006-01-02T15"
)

// Bounds and horizons (see the package doc).
const (
	HourGrace         = 10 * time.Minute
	HoursKept         = 24 * time.Hour
	DeviceTTL         = 7 * 24 * time.Hour
	FleetTTL          = 48 * time.Hour
	MaxDevicesPerHour = 4096
)

// Declaration is what the module adds to the topology: its topics (partition
// count 0: the topology's keyed count), a doc line per group and the
// boundary. The groups' edges (and so their flows) are derived from what
// their handlers register (Module.Groups).
func Declaration() topology.Extension {
	return topology.Extension{ // Name: the module's (host.Compose)
		Topics: []topology.Topic{
			{Name: Table, Key: "device_id", Value: "fencestream.devicestats.v1.DeviceStats", Cleanup: topology.CleanupCompact,
				Doc: "pings per device and hour"},
			topology.TimersTopic(Group, "device_id", 0),
			{Name: TopicHours, Key: "device_id", Value: "fencestream.devicestats.v1.DeviceHour", Cleanup: topology.CleanupDelete,
				Doc: "a device's closed hour: its ping count"},
			{Name: FleetLoop, Key: "hour", Value: "fencestream.devicestats.v1.DeviceHour", Cleanup: topology.CleanupDelete,
				Doc: "device hours re-keyed by hour"},
			{Name: FleetTable, Key: "hour", Value: "fencestream.devicestats.v1.FleetHour", Cleanup: topology.CleanupCompact,
				Doc: "active devices and pings per hour"},
			topology.TimersTopic(Fleet, "hour", 0),
		},
		// Only what code cannot say: the edges come from the handlers (Module.Groups).
		Processors: []topology.Processor{
			{Group: Group, Doc: "counts pings per device in hourly windows on event time; a closed hour goes to device-hours"},
			{Group: Fleet, Doc: "counts active devices and pings per hour, each device once"},
		},
		Boundaries: []topology.Boundary{{
			Processor: Fleet, From: TopicHours, To: FleetLoop,
			Preserved: "the order of one device's hours (one device's summaries of an hour stay in order on one partition)",
			Lost:      "order between devices and between hours: an hour's summaries arrive from every device partition, interleaved",
			Lag:       "an hour reaches the fleet once its device's partition's stream time passes the hour's end plus 10 min grace; duplicates are dropped by device id",
		}},
	}
}

// Module is the processor as binaries host it: its declaration, both groups
// and both routes.
func Module() host.Module {
	return host.Define(host.Module{
		Name:     Group,
		Declares: Declaration(),
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			gs := New(topo, nil)
			return []group.Declarer{gs.Devices, gs.Fleet}, nil
		},
		Run: func(ctx context.Context, env host.Env) error {
			gs := New(env.Topology, env.Log)
			opts := append(env.Group, group.OnReady(env.Started))
			eg, ctx := errgroup.WithContext(ctx)
			eg.Go(func() error { return gs.Devices.Run(ctx, env.Cluster, opts...) })
			eg.Go(func() error { return gs.Fleet.Run(ctx, env.Cluster, opts...) })
			return eg.Wait()
		},
		Routes: []host.Route{host.ViewRoute(Route, Table, serveDevice), host.ViewRoute(FleetRoute, FleetTable, serveHour)},
	})
}

func serveDevice(v *group.View[devicestatspb.DeviceStats, *devicestatspb.DeviceStats], w http.ResponseWriter, r *http.Request) {
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
	wins, err := windows.WindowsOf[emptypb.Empty](st.GetHourly())
	if err != nil {
		host.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	hours := []map[string]any{}
	for _, h := range wins {
		hours = append(hours, map[string]any{"hour": h.Start.UTC().Format(HourFormat), "pings": h.Count, "final": h.Closed})
	}
	host.WriteJSON(w, http.StatusOK, map[string]any{"device": device, "pings": st.GetPings(), "late": st.GetHourly().GetLate(), "hours": hours})
}

func serveHour(v *group.View[devicestatspb.FleetHour, *devicestatspb.FleetHour], w http.ResponseWriter, r *http.Request) {
	hour := r.PathValue("hour")
	st, err := v.Get(hour)
	if err != nil {
		host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if st == nil {
		host.WriteError(w, http.StatusNotFound, "no closed device hours for "+hour+" (format "+HourFormat+", UTC)")
		return
	}
	host.WriteJSON(w, http.StatusOK, map[string]any{"hour": hour, "devices": st.GetDevices(), "pings": st.GetPings(), "duplicates": st.GetDuplicates()})
}
