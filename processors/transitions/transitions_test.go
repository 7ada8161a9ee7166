package transitions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/versioned"
	"github.com/fencestream/fencestream/processors/transitions"
	"github.com/fencestream/fencestream/processors/transitions/transitionspb"
)

// base is 2027-01-15 08:00 UTC; event times are offsets from it.
var base = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

func start(t *testing.T) *grouptest.Harness {
	t.Helper()
	topo, err := host.Compose(geofence.Topology(), transitions.Module())
	if err != nil {
		t.Fatal(err)
	}
	h := grouptest.New(t, base.Add(30*24*time.Hour))
	h.Start(transitions.New(topo, nil))
	h.Start(transitions.NewPings(topo, nil))
	return h
}

func trigger(h *grouptest.Harness, device, fence string, typ geofencepb.TriggerType, at time.Duration) {
	h.Consume(geofence.TopicTriggers, device, &geofencepb.Trigger{TriggerId: fmt.Sprintf("%s|%s|%d|%d", device, fence, typ, at.Milliseconds()),
		DeviceId: device, FenceId: fence, Type: typ, EventTimeMs: base.Add(at).UnixMilli()})
}

const (
	enter = geofencepb.TriggerType_TRIGGER_TYPE_ENTER
	exit  = geofencepb.TriggerType_TRIGGER_TYPE_EXIT
)

// A device's transitions are answered as of a time, whatever order they
// arrived in; one older than the history is dropped and dead-lettered.
func TestAsOfRoute(t *testing.T) {
	h := start(t)
	trigger(h, "car-1", "depot", enter, 0)
	trigger(h, "car-1", "yard", enter, 2*time.Hour)
	trigger(h, "car-1", "depot", exit, time.Hour) // late: between the two
	trigger(h, "car-1", "yard", exit, 9*24*time.Hour)
	trigger(h, "car-1", "depot", enter, 30*time.Minute) // older than 7 days before day 9: dropped
	h.Catchup()
	// History from day 2 (day 9 minus 7): the yard ENTER (valid until day
	// 9) and the EXIT are kept, the depot's versions dropped.
	if st := grouptest.State[kitpb.VersionSet](h, transitions.Table, "car-1"); len(st.GetVersions()) != 2 || st.GetExpired() != 1 {
		t.Fatalf("car-1's set after a week and a half: %v", st)
	}

	mux := http.NewServeMux()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range transitions.Module().Routes {
		hd, run, err := r.Build(host.RouteEnv{View: []group.ViewOpt{group.ViewTester(h.TT)}})
		if err != nil {
			t.Fatal(err)
		}
		go run(ctx)
		mux.Handle(r.Pattern, hd)
	}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code == http.StatusServiceUnavailable && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // the view is recovering; bounded by the deadline
				continue
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
			}
			return rec.Code, body
		}
	}
	code, body := get("/v1/devices/car-1/transition")
	if code != http.StatusOK || body["fence"] != "yard" || body["type"] != "TRIGGER_TYPE_EXIT" {
		t.Fatalf("latest: %d %v", code, body)
	}
	if code, body := get("/v1/devices/car-1/transition?at=2027-01-17T08:00:00Z"); code != http.StatusOK || body["fence"] != "yard" || body["type"] != "TRIGGER_TYPE_ENTER" || body["valid_to"] != "2027-01-24T08:00:00Z" {
		t.Fatalf("as of day 2: %d %v", code, body)
	}
	if code, body := get("/v1/devices/car-1/transition?at=2027-01-16T08:00:00Z"); code != http.StatusNotFound || body["error"] == nil {
		t.Fatalf("as of day 1, older than the history: %d %v", code, body)
	}
	if code, _ := get("/v1/devices/car-1/transition?at=yesterday"); code != http.StatusBadRequest {
		t.Fatalf("a bad time: %d", code)
	}
}

// Before the history moves on, every version answers as of its time.
func TestAsOfOutOfOrder(t *testing.T) {
	h := start(t)
	trigger(h, "car-2", "depot", enter, 0)
	trigger(h, "car-2", "yard", enter, 2*time.Hour)
	trigger(h, "car-2", "depot", exit, time.Hour) // late: between the two
	h.Catchup()
	st := grouptest.State[kitpb.VersionSet](h, transitions.Table, "car-2")
	for _, c := range []struct {
		at   time.Duration
		want string
	}{
		{-time.Minute, "none"}, {0, "ENTER depot"}, {59 * time.Minute, "ENTER depot"},
		{time.Hour, "EXIT depot"}, {90 * time.Minute, "EXIT depot"}, {3 * time.Hour, "ENTER yard"},
	} {
		v, err := versioned.AsOf[geofencepb.Trigger](transitions.Set(st), base.Add(c.at))
		if err != nil {
			t.Fatal(err)
		}
		got := "none"
		if v.Found() {
			got = fmt.Sprintf("%s %s", map[geofencepb.TriggerType]string{enter: "ENTER", exit: "EXIT"}[v.Value.GetType()], v.Value.GetFenceId())
		}
		if got != c.want {
			t.Errorf("as of +%s: %s, want %s", c.at, got, c.want)
		}
	}
}

// Each ping counts where its device was when it sent it: a ping that
// arrives after the device left still counts inside (the join reads the
// transitions as of the ping's time, not the latest).
func TestPingsJoinAsOf(t *testing.T) {
	h := start(t)
	ping := func(at time.Duration) {
		h.Consume(geofence.TopicPings, "car-3", &geofencepb.Ping{DeviceId: "car-3", DeviceTimeMs: base.Add(at).UnixMilli()})
	}
	trigger(h, "car-3", "depot", enter, 0)
	trigger(h, "car-3", "depot", exit, time.Hour)
	// A crossing of another fence while inside the depot changes nothing.
	trigger(h, "car-3", "bridge", geofencepb.TriggerType_TRIGGER_TYPE_CROSS, 40*time.Minute)
	h.Catchup()
	ping(30 * time.Minute) // late: the device has left since
	ping(90 * time.Minute)
	ping(-10 * time.Minute) // before any transition
	ping(45 * time.Minute)
	h.Catchup()
	st := grouptest.State[transitionspb.PingPresence](h, transitions.PingsTable, "car-3")
	if st.GetInside() != 2 || st.GetOutside() != 2 || st.GetUnknown() != 0 || st.GetLastFence() != "depot" || st.GetLastInsideMs() != base.Add(45*time.Minute).UnixMilli() {
		t.Fatalf("car-3's pings: %v", st)
	}
	// Past the history (7 days after the device's last transition), a
	// ping's place is unknown.
	trigger(h, "car-3", "yard", enter, 9*24*time.Hour)
	h.Catchup()
	ping(24 * time.Hour)
	h.Catchup()
	if st := grouptest.State[transitionspb.PingPresence](h, transitions.PingsTable, "car-3"); st.GetUnknown() != 1 {
		t.Fatalf("a ping older than the history: %v", st)
	}
}
