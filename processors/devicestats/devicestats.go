// Package devicestats is the guide's worked example (processors/README.md) on the stream DSL: pings per device and hour
// (group devicestats), hours re-keyed by hour (devicehours), and each hour's devices and pings (fleetstats).
package devicestats

import (
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	pb "github.com/fencestream/fencestream/processors/devicestats/devicestatspb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// Names, the hour's key format (UTC) and the bounds: a ping later than its hour's end plus HourGrace is late.
const (
	Group, Fleet, Rekey, Table, FleetTable  = "devicestats", "fleetstats", "devicehours", Group + "-table", Fleet + "-table"
	TopicHours, TopicByHour, HourFormat     = "device-hours", "device-hours-by-hour", "2006-01-02T15"
	Route, FleetRoute                       = "GET /v1/devicestats/{device}", "GET /v1/fleetstats/{hour}"
	HourGrace, HoursKept, MaxDevicesPerHour = 10 * time.Minute, 24 * time.Hour, 4096
	DeviceTTL, FleetTTL                     = 7 * 24 * time.Hour, 48 * time.Hour
)

// Define declares the app on b; an input that contradicts its key is dead-lettered as invalid.
func Define(b *streams.Builder) {
	b.Stream[geofencepb.Ping](geofence.TopicPings).
		Filter(func(dev string, p *geofencepb.Ping) bool { return p.GetDeviceId() == dev && p.GetDeviceTimeMs() > 0 }, streams.DeadLetter(deadletter.ReasonInvalid)).
		GroupByKey().WindowedBy(streams.TimeWindows(windows.Tumbling(time.Hour, HourGrace).Retain(HoursKept)), pingTime).
		Aggregate(Group, nil, func(_ string, _ *geofencepb.Ping, st *pb.DeviceStats) { st.Pings++ }, group.StateTTL(DeviceTTL)).
		ToStream().Map(func(dev string, w *kitpb.Window) (string, *pb.DeviceHour) { // a closed hour, stamped from its window
		return dev, &pb.DeviceHour{DeviceId: dev, Hour: hourOf(w.GetStartMs()), StartMs: w.GetStartMs(), Pings: w.GetCount()}
	}).Through(TopicHours, streams.EventTime(hourEnd)).Filter(validHour, streams.DeadLetter(deadletter.ReasonInvalid)).
		GroupBy(topology.Boundary{
			Preserved: "the order of one device's hours (one device's summaries of an hour stay in order on one partition)",
			Lost:      "order between devices and between hours: an hour's summaries arrive from every device partition, interleaved",
			Lag:       "an hour reaches the fleet once its device's partition's stream time passes the hour's end plus 10 min grace; duplicates are dropped by device id",
		}, TopicByHour, func(_ string, s *pb.DeviceHour) string { return s.GetHour() }).
		Aggregate(Fleet, func() *pb.FleetHour { return &pb.FleetHour{Seen: &kitpb.SeenSet{}} }, count, group.StateTTL(FleetTTL))
}

func pingTime(p *geofencepb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }
func hourEnd(s *pb.DeviceHour) time.Time    { return time.UnixMilli(s.GetStartMs()).Add(time.Hour) }
func hourOf(ms int64) string                { return time.UnixMilli(ms).UTC().Format(HourFormat) }
func validHour(dev string, s *pb.DeviceHour) bool {
	return s.GetDeviceId() == dev && s.GetHour() == hourOf(s.GetStartMs())
}

// count adds a device's hour to its fleet hour once; again (a retry, a replay), it is a duplicate.
func count(_ string, s *pb.DeviceHour, st *pb.FleetHour) *pb.FleetHour {
	st.StartMs = s.GetStartMs()
	if (group.Dedup{Horizon: time.Hour, Max: MaxDevicesPerHour}).Seen(st.Seen, s.GetDeviceId(), hourEnd(s)) {
		st.Duplicates++
	} else {
		st.Devices, st.Pings = st.Devices+1, st.Pings+s.GetPings()
	}
	return st
}

// Module hosts the app with its topics and both routes.
func Module() host.Module {
	const ds, del, compact = "fencestream.devicestats.v1.", topology.CleanupDelete, topology.CleanupCompact
	m := streams.Module(Rekey, []topology.Topic{{Name: Table, Key: "device_id", Value: ds + "DeviceStats", Cleanup: compact},
		{Name: TopicHours, Key: "device_id", Value: ds + "DeviceHour", Cleanup: del}, {Name: TopicByHour, Key: "hour", Value: ds + "DeviceHour", Cleanup: del},
		{Name: FleetTable, Key: "hour", Value: ds + "FleetHour", Cleanup: compact}, {Name: Rekey + "-table", Key: "device_id", Value: "google.protobuf.Empty", Cleanup: compact},
		topology.TimersTopic(Group, "device_id", 0), topology.TimersTopic(Fleet, "hour", 0)}, Define)
	m.Declares.Processors = []topology.Processor{{Group: Group, Doc: "counts pings per device in hourly windows on event time"}}
	m.Routes = []host.Route{streams.Route(Route, Table, func(dev string, st *pb.DeviceStats) any {
		hours := []map[string]any{}
		for _, h := range st.GetHourly().GetWindows() {
			hours = append(hours, map[string]any{"hour": hourOf(h.GetStartMs()), "pings": h.GetCount(), "final": h.GetClosed()})
		}
		return map[string]any{"device": dev, "pings": st.GetPings(), "late": st.GetHourly().GetLate(), "hours": hours}
	}), streams.Route(FleetRoute, FleetTable, func(hour string, st *pb.FleetHour) any {
		return map[string]any{"hour": hour, "devices": st.GetDevices(), "pings": st.GetPings(), "duplicates": st.GetDuplicates()}
	})}
	return m
}
