package debounce_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"google.golang.org/protobuf/proto"
)

const crossLat, crossLon = 52.5, 13.4

// at returns the point east and north metres from the "ring" fence's centre.
func at(east, north float64) (lat, lon float64) {
	return crossLat + north/111_320, crossLon + east/(111_320*math.Cos(crossLat*math.Pi/180))
}

// crossingCatalogue: "ring", a 100 m circle with crossing on; "plain", the
// same circle 2 km north with crossing off; "square", a 200 m square 2 km
// south with crossing on (set by its GeoJSON property).
func crossingCatalogue(t *testing.T) *fences.Snapshot {
	t.Helper()
	ring, err := fences.NewCircleFence("ring", "", crossLat, crossLon, 100, fences.Settings{Crossing: true})
	if err != nil {
		t.Fatal(err)
	}
	plat, plon := at(0, 2000)
	plain, err := fences.NewCircleFence("plain", "", plat, plon, 100, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	var pts []string
	for _, c := range [][2]float64{{-100, -2100}, {100, -2100}, {100, -1900}, {-100, -1900}, {-100, -2100}} {
		lat, lon := at(c[0], c[1])
		pts = append(pts, "["+strconv.FormatFloat(lon, 'f', -1, 64)+","+strconv.FormatFloat(lat, 'f', -1, 64)+"]")
	}
	sq, err := fences.ParseFences([]byte(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"square","crossing":true},"geometry":{"type":"Polygon","coordinates":[[` + strings.Join(pts, ",") + `]]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := fences.New()
	if err := c.Apply(1, append([]fences.Fence{ring, plain}, sq...), nil); err != nil {
		t.Fatal(err)
	}
	return c.Snapshot()
}

type fix struct {
	east, north, accM float64
	ms                int64
}

// drive applies the fixes to a new device and returns every trigger.
func drive(t *testing.T, snap *fences.Snapshot, cfg debounce.Settings, fixes ...fix) (*geofencepb.DeviceState, []*geofencepb.Trigger) {
	t.Helper()
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	var all []*geofencepb.Trigger
	for i, f := range fixes {
		lat, lon := at(f.east, f.north)
		out := debounce.Apply(st, &geofencepb.Ping{DeviceId: "veh", Lat: lat, Lon: lon, AccuracyM: f.accM, DeviceTimeMs: f.ms, Hlc: uint64(1000 + i)}, snap, cfg)
		all = append(all, out.Triggers...)
	}
	return st, all
}

func crosses(ts []*geofencepb.Trigger) []*geofencepb.Trigger {
	var out []*geofencepb.Trigger
	for _, tr := range ts {
		if tr.Type == geofencepb.TriggerType_TRIGGER_TYPE_CROSS {
			out = append(out, tr)
		}
	}
	return out
}

// TestCrossingBetweenFixes: two fixes 30 s apart, 300 m either side of a
// 100 m circle (and of a 200 m square), none inside: one CROSS each, timed
// between the fixes (at the chord's middle: halfway), with the id made of
// the CROSS type and the second fix's HLC.
func TestCrossingBetweenFixes(t *testing.T) {
	snap := crossingCatalogue(t)
	for _, tc := range []struct {
		fence  string
		north  float64
		wantMs int64
	}{{"ring", 0, 15_000}, {"square", -2000, 15_000}, {"ring", 60, 15_000}} {
		_, trs := drive(t, snap, debounce.DefaultSettings(),
			fix{-300, tc.north, 10, 0 + 1_000_000}, fix{300, tc.north, 10, 30_000 + 1_000_000})
		got := crosses(trs)
		if len(got) != 1 || got[0].FenceId != tc.fence {
			t.Fatalf("%s at %v m north: CROSS triggers %v, want one for %s", tc.fence, tc.north, got, tc.fence)
		}
		tr := got[0]
		if d := tr.EventTimeMs - (1_000_000 + tc.wantMs); d < -200 || d > 200 {
			t.Errorf("%s: event time %d, want about %d (between the fixes, at the chord's middle)", tc.fence, tr.EventTimeMs, 1_000_000+tc.wantMs)
		}
		if want := geofence.TriggerID("veh", tc.fence, geofencepb.TriggerType_TRIGGER_TYPE_CROSS, 1001); tr.TriggerId != want || tr.Hlc != 1001 {
			t.Errorf("%s: id %q hlc %d, want %q and the second fix's HLC 1001", tc.fence, tr.TriggerId, tr.Hlc, want)
		}
	}
	// The chord's middle is not the segment's: 100 m before the circle, 500 m after.
	_, trs := drive(t, snap, debounce.DefaultSettings(), fix{-200, 0, 10, 1_000_000}, fix{600, 0, 10, 1_040_000})
	if got := crosses(trs); len(got) != 1 || math.Abs(float64(got[0].EventTimeMs-1_010_000)) > 200 {
		t.Fatalf("asymmetric segment: CROSS %v, want one at about 1010000 ms (200 m of 800 m)", got)
	}
}

// TestNoCrossingWhenAFixIsInside: the device is seen inside (ENTER and EXIT's
// business, whether they confirm or not): no CROSS on either segment.
func TestNoCrossingWhenAFixIsInside(t *testing.T) {
	snap := crossingCatalogue(t)
	_, trs := drive(t, snap, debounce.DefaultSettings(),
		fix{-300, 0, 10, 1_000_000}, fix{0, 0, 10, 1_015_000}, fix{300, 0, 10, 1_030_000})
	if got := crosses(trs); len(got) != 0 {
		t.Fatalf("CROSS %v with a fix inside, want none", got)
	}
}

// TestNoCrossingWhenAccuracyDoesNotProveIt: a segment 80 m from a 100 m
// circle's centre runs 120 m inside it, 20 m deep at most. With 40 m fixes
// that is less deep than twice the interpolated position's σ (28 m): no
// CROSS; with 5 m fixes it is one. And 99 m from the centre (28 m inside,
// 1 m deep) even 5 m fixes prove nothing.
func TestNoCrossingWhenAccuracyDoesNotProveIt(t *testing.T) {
	snap := crossingCatalogue(t)
	_, trs := drive(t, snap, debounce.DefaultSettings(), fix{-300, 80, 40, 1_000_000}, fix{300, 80, 40, 1_030_000})
	if got := crosses(trs); len(got) != 0 {
		t.Fatalf("grazing segment, 40 m fixes: CROSS %v, want none", got)
	}
	_, trs = drive(t, snap, debounce.DefaultSettings(), fix{-300, 80, 5, 1_000_000}, fix{300, 80, 5, 1_030_000})
	if got := crosses(trs); len(got) != 1 {
		t.Fatalf("same segment, 5 m fixes: CROSS %v, want one", got)
	}
	_, trs = drive(t, snap, debounce.DefaultSettings(), fix{-300, 99, 5, 1_000_000}, fix{300, 99, 5, 1_030_000})
	if got := crosses(trs); len(got) != 0 {
		t.Fatalf("segment 1 m deep, 5 m fixes: CROSS %v, want none", got)
	}
}

// TestNoCrossingAfterSilence: fixes farther apart than the silence timeout
// (10 min) say nothing about the path between them.
func TestNoCrossingAfterSilence(t *testing.T) {
	snap := crossingCatalogue(t)
	if _, trs := drive(t, snap, debounce.DefaultSettings(), fix{-300, 0, 5, 1_000_000}, fix{300, 0, 5, 1_000_000 + 11*60_000}); len(crosses(trs)) != 0 {
		t.Fatalf("fixes 11 min apart: CROSS %v, want none", crosses(trs))
	}
}

// TestCrossingOffByDefault: a fence without the setting gets no CROSS and
// the device state carries no accuracy (no bytes) unless the debouncer's
// default turns crossings on.
func TestCrossingOffByDefault(t *testing.T) {
	snap := crossingCatalogue(t)
	if debounce.DefaultSettings().Crossing {
		t.Fatal("Crossing is on by default")
	}
	path := []fix{{-300, 2000, 10, 1_000_000}, {300, 2000, 10, 1_030_000}}
	if _, trs := drive(t, snap, debounce.DefaultSettings(), path...); len(crosses(trs)) != 0 {
		t.Fatalf("fence without crossing: CROSS %v", crosses(trs))
	}
	on := debounce.DefaultSettings()
	on.Crossing = true
	if _, trs := drive(t, snap, on, path...); len(crosses(trs)) != 1 {
		t.Fatalf("debouncer default on: CROSS %v, want one", crosses(trs))
	}
	// A catalogue with no crossing fence: the state stays as it was.
	c := fences.New()
	plat, plon := at(0, 2000)
	plain, _ := fences.NewCircleFence("plain", "", plat, plon, 100, fences.Settings{})
	if err := c.Apply(1, []fences.Fence{plain}, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := drive(t, c.Snapshot(), debounce.DefaultSettings(), path...); st.LastAccuracyM != 0 {
		t.Fatalf("crossings off everywhere, yet last_accuracy_m = %v is stored", st.LastAccuracyM)
	}
}

// TestCrossingReplayIsDeterministic: the same pings applied again to fresh
// state make the same CROSS triggers, byte for byte.
func TestCrossingReplayIsDeterministic(t *testing.T) {
	snap := crossingCatalogue(t)
	path := []fix{{-300, 0, 10, 1_000_000}, {300, 0, 10, 1_030_000}, {300, -2300, 10, 1_090_000}, {-300, -1700, 10, 1_120_000}}
	_, a := drive(t, snap, debounce.DefaultSettings(), path...)
	_, b := drive(t, snap, debounce.DefaultSettings(), path...)
	if len(crosses(a)) != 2 || len(a) != len(b) {
		t.Fatalf("first run %d CROSS of %d triggers, replay %d triggers; want 2 and the same", len(crosses(a)), len(a), len(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("trigger %d differs on replay:\n%v\n%v", i, a[i], b[i])
		}
	}
}
