package devicestats

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/devicestats/devicestatspb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// Handler contexts of the two groups.
type (
	DeviceContext = group.Context[devicestatspb.DeviceStats, *devicestatspb.DeviceStats]
	FleetContext  = group.Context[devicestatspb.FleetHour, *devicestatspb.FleetHour]
)

// Groups are the module's two groups, ready to build processors from.
type Groups struct {
	Devices *group.Group[devicestatspb.DeviceStats, *devicestatspb.DeviceStats]
	Fleet   *group.Group[devicestatspb.FleetHour, *devicestatspb.FleetHour]
}

// handles are the windows, output and loop the handlers use: they belong to
// the groups New built, so each New has its own (never package variables).
type handles struct {
	hourly *windows.Windows[devicestatspb.DeviceStats, *devicestatspb.DeviceStats, emptypb.Empty, *emptypb.Empty]
	hours  group.Out[devicestatspb.DeviceHour, *devicestatspb.DeviceHour]
	byHour group.LoopOut[devicestatspb.DeviceHour, *devicestatspb.DeviceHour]
}

// New defines both groups over topo, which must include Declaration
// (host.Compose with Module does that).
func New(topo *topology.Topology, log *slog.Logger) Groups {
	h := &handles{}
	d := group.New[devicestatspb.DeviceStats](topo, Group, log)
	group.Stream(d, geofence.TopicPings, h.ping, group.EventTime(pingTime))
	h.hourly = windows.NewWindows(d, "hourly", windows.Tumbling(time.Hour, HourGrace).Retain(HoursKept), hourlySet, h.closeHour)
	h.hours = group.Output[devicestatspb.DeviceHour](d, TopicHours)
	group.StateTTL(d, DeviceTTL)

	f := group.New[devicestatspb.FleetHour](topo, Fleet, log)
	group.Stream(f, TopicHours, h.rekey)
	h.byHour = group.Loop(f, h.count, group.EventTime(hourEnd))
	group.StateTTL(f, FleetTTL)
	return Groups{Devices: d, Fleet: f}
}

func pingTime(p *geofencepb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }

func hourEnd(s *devicestatspb.DeviceHour) time.Time {
	return time.UnixMilli(s.GetStartMs()).Add(time.Hour)
}

func hourlySet(st *devicestatspb.DeviceStats) *kitpb.WindowSet {
	st.Hourly = cmp.Or(st.Hourly, &kitpb.WindowSet{}) // created on first use
	return st.Hourly
}

// ping adds a ping to its device's hour; a late one only to the late count.
func (h *handles) ping(c *DeviceContext, p *geofencepb.Ping) error {
	if p.GetDeviceId() != c.Key() || p.GetDeviceTimeMs() <= 0 {
		return fmt.Errorf("ping of device %q at %d ms under key %q", p.GetDeviceId(), p.GetDeviceTimeMs(), c.Key())
	}
	st := cmp.Or(c.State(), &devicestatspb.DeviceStats{}) // nil for a new key
	switch err := h.hourly.Add(c, st, pingTime(p), 1, nil); {
	case errors.Is(err, windows.ErrLate): // counted by the kit (st.Hourly.Late), in no hour
	case err != nil:
		return err
	default:
		st.Pings++
	}
	c.SetState(st)
	return nil
}

// closeHour runs once per device and hour, when the hour closes (in ping or
// in the windows' timer handler): it emits the summary, stamped from the
// window, never from the clock.
func (h *handles) closeHour(c *DeviceContext, _ *devicestatspb.DeviceStats, w windows.Window[emptypb.Empty, *emptypb.Empty]) error {
	h.hours.Emit(c, c.Key(), &devicestatspb.DeviceHour{
		DeviceId: c.Key(), Hour: w.Start.UTC().Format(HourFormat), StartMs: w.Start.UnixMilli(), Pings: w.Count,
	})
	return nil
}

// rekey sends a device's hour to the fleet group's loop under its hour: the
// boundary.
func (h *handles) rekey(c *FleetContext, s *devicestatspb.DeviceHour) error {
	if s.GetDeviceId() != c.Key() || s.GetHour() != time.UnixMilli(s.GetStartMs()).UTC().Format(HourFormat) {
		return fmt.Errorf("device hour %q (start %d ms) of device %q under key %q", s.GetHour(), s.GetStartMs(), s.GetDeviceId(), c.Key())
	}
	h.byHour.Send(c, s.GetHour(), s)
	return nil
}

// count adds a device's hour to the fleet's hour, once per device.
func (h *handles) count(c *FleetContext, s *devicestatspb.DeviceHour) error {
	if s.GetHour() != c.Key() {
		return fmt.Errorf("device hour %q under key %q", s.GetHour(), c.Key())
	}
	st := cmp.Or(c.State(), &devicestatspb.FleetHour{StartMs: s.GetStartMs()})
	st.Seen = cmp.Or(st.Seen, &kitpb.SeenSet{})
	if (group.Dedup{Horizon: time.Hour, Max: MaxDevicesPerHour}).Seen(st.Seen, s.GetDeviceId(), hourEnd(s)) {
		st.Duplicates++
	} else {
		st.Devices++
		st.Pings += s.GetPings()
	}
	c.SetState(st)
	return nil
}
