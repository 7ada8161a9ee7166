package devicestats_test

import (
	"context"
	"encoding/json"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/processors/devicestats/devicestatspb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/view"
)

// base is 2027-01-15 08:00 UTC; event times are offsets from it.
var base = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

const hour8 = "2027-01-15T08"

// start runs the module's groups on one tester; the wall clock is
// ahead of every event, so stream time comes from the data.
func start(t *testing.T) *grouptest.Harness {
	t.Helper()
	topo, err := host.Compose(geofence.Topology(), devicestats.Module())
	if err != nil {
		t.Fatal(err)
	}
	h := grouptest.New(t, base.Add(72*time.Hour))
	b := streams.New(topo, devicestats.Rekey, nil)
	devicestats.Define(b)
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range app.Groups() { // devicestats, fleetstats and the routing group devicehours
		h.Start(g)
	}
	return h
}

func ping(h *grouptest.Harness, device string, at time.Duration) {
	h.Consume(geofence.TopicPings, device, &geofencepb.Ping{DeviceId: device, DeviceTimeMs: base.Add(at).UnixMilli()})
}

func summaries(h *grouptest.Harness) []*devicestatspb.DeviceHour {
	var out []*devicestatspb.DeviceHour
	for _, r := range grouptest.Drain[devicestatspb.DeviceHour](h, devicestats.TopicHours) {
		out = append(out, r.Value)
	}
	return out
}

func fleet(h *grouptest.Harness, hour string) *devicestatspb.FleetHour {
	return grouptest.State[devicestatspb.FleetHour](h, devicestats.FleetTable, hour)
}

func device(h *grouptest.Harness, dev string) *devicestatspb.DeviceStats {
	return grouptest.State[devicestatspb.DeviceStats](h, devicestats.Table, dev)
}

// A device's hour closes when its partition's stream time passes the hour's
// end plus grace, moved here by another device's ping (Goka's tester has one
// partition, so every key shares its stream time): the windows' stream-time
// timer closes it, and its summary crosses the boundary to the fleet.
func TestHourClosedByStreamTimeTimerReachesFleet(t *testing.T) {
	h := start(t)
	ping(h, "car", 5*time.Minute)
	ping(h, "car", 20*time.Minute)
	ping(h, "van", 30*time.Minute)
	ping(h, "bus", 69*time.Minute) // stream time 09:09: hour 08 is within grace
	h.Advance(time.Minute)
	h.FireTimers()
	if got := summaries(h); len(got) != 0 {
		t.Fatalf("summaries before end+grace: %v", got)
	}
	ping(h, "bus", 70*time.Minute) // 09:10: hour 08 is past end+grace
	if got := summaries(h); len(got) != 0 {
		t.Fatalf("closed without its timer (only the key's own record or the timer may close it): %v", got)
	}
	h.Advance(time.Minute)
	h.FireTimers()
	got := summaries(h)
	if len(got) != 2 || got[0].GetDeviceId() != "car" || got[0].GetHour() != hour8 || got[0].GetPings() != 2 || got[1].GetPings() != 1 {
		t.Fatalf("summaries %v, want car's hour 08 with 2 pings and van's with 1", got)
	}
	if f := fleet(h, hour8); f.GetDevices() != 2 || f.GetPings() != 3 {
		t.Fatalf("fleet hour %v, want 2 devices, 3 pings", f)
	}
	if st := device(h, "car"); st.GetPings() != 2 || len(st.GetHourly().GetWindows()) != 1 || !st.GetHourly().GetWindows()[0].GetClosed() {
		t.Fatalf("car %v, want 2 pings in one closed hour", st)
	}
}

// A summary that arrives again (a producer retry, a replay of device-hours)
// is recognised by its device id: counted as a duplicate, not added.
func TestDuplicateSummaryCountedOnce(t *testing.T) {
	h := start(t)
	car, bus := "car", "bus"
	ping(h, car, 5*time.Minute)
	ping(h, car, 6*time.Minute)
	ping(h, bus, 10*time.Minute)
	ping(h, car, 80*time.Minute) // closes car's hour 08 (its own record)
	ping(h, bus, 81*time.Minute) // and bus's
	got := summaries(h)
	if len(got) != 2 {
		t.Fatalf("summaries %v, want car's and bus's hour 08", got)
	}
	for _, s := range got {
		h.Consume(devicestats.TopicHours, s.GetDeviceId(), s)
	}
	h.Consume(devicestats.TopicHours, car, got[0])
	if f := fleet(h, hour8); f.GetDevices() != 2 || f.GetPings() != 3 || f.GetDuplicates() != 3 {
		t.Fatalf("fleet hour %v, want 2 devices, 3 pings, 3 duplicates", f)
	}
}

// Out of order within grace counts; beyond grace the ping is late: counted
// in the late count, in no hour, and the closed hour's summary is unchanged.
// Pings and summaries that contradict their key are dead-lettered.
func TestLatePingCountedNotApplied(t *testing.T) {
	h := start(t)
	car, bus := "car", "bus"
	ping(h, car, 5*time.Minute)
	ping(h, bus, 65*time.Minute)
	ping(h, car, 55*time.Minute) // out of order, within grace
	ping(h, bus, 70*time.Minute) // stream time 09:10: hour 08 closes
	ping(h, car, 50*time.Minute) // late: car's own record closes its hour first
	st := device(h, car)
	if st.GetPings() != 2 || st.GetHourly().GetLate() != 1 {
		t.Fatalf("car %v, want 2 pings and 1 late", st)
	}
	for _, s := range summaries(h) {
		if s.GetDeviceId() == car && s.GetPings() != 2 {
			t.Fatalf("car's summary %v, want 2 pings", s)
		}
	}
	if f := fleet(h, hour8); f.GetPings() != 2 {
		t.Fatalf("fleet hour %v, want car's 2 pings", f)
	}
	h.Consume(geofence.TopicPings, car, &geofencepb.Ping{DeviceId: "someone-else", DeviceTimeMs: base.UnixMilli()})
	h.Consume(devicestats.TopicHours, car, &devicestatspb.DeviceHour{DeviceId: car, Hour: "2027-01-15T09", StartMs: base.UnixMilli(), Pings: 1})
	if dl := grouptest.DeadLetters(h); len(dl) != 2 || dl[0].Reason != deadletter.ReasonInvalid || dl[1].Reason != deadletter.ReasonInvalid {
		t.Fatalf("dead letters %+v, want two invalid", dl)
	}
}

// Both routes answer from views of the tables, in the JSON the guide shows.
func TestRoutes(t *testing.T) {
	h := start(t)
	car := "car"
	ping(h, car, 5*time.Minute)
	ping(h, car, 80*time.Minute)
	h.Catchup()
	mux := http.NewServeMux()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range devicestats.Module().Routes {
		hd, run, err := r.Build(host.RouteEnv{View: []view.Opt{view.Tester(h.TT)}})
		if err != nil {
			t.Fatal(err)
		}
		go run(ctx)
		mux.Handle(r.Pattern, hd)
	}
	get := func(path string, v any) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code == http.StatusOK {
				if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
					t.Fatal(err)
				}
				return
			}
			if rec.Code != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
			}
			time.Sleep(10 * time.Millisecond) // the view is recovering; bounded by the deadline
		}
	}
	type hour struct {
		Hour  string
		Pings int64
		Final bool
	}
	var dev struct {
		Pings, Late int64
		Hours       []hour
	}
	get("/v1/devicestats/"+car, &dev)
	if dev.Pings != 2 || len(dev.Hours) != 2 || dev.Hours[0] != (hour{Hour: hour8, Pings: 1, Final: true}) {
		t.Fatalf("device route %+v", dev)
	}
	var fl struct{ Devices, Pings int64 }
	get("/v1/fleetstats/"+hour8, &fl)
	if fl.Devices != 1 || fl.Pings != 1 {
		t.Fatalf("fleet route %+v", fl)
	}
}
