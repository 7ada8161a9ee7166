package debounce_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
)

// groupCatalogue holds zone-1 (no groups, as testCatalogue) and depot, the
// same circle limited to group fleet-a and tagged.
func groupCatalogue(t *testing.T) *fences.Snapshot {
	t.Helper()
	open, err := fences.NewCircleFence("zone-1", "Zone 1", centerLat, centerLon, 1000, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	depot, err := fences.NewCircleFence("depot", "Depot", centerLat, centerLon, 1000, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	depot.Tags, depot.Groups = []string{"depot", "north"}, []string{"fleet-a"}
	cat := fences.New()
	if err := cat.Apply(9, []fences.Fence{open, depot}, nil); err != nil {
		t.Fatal(err)
	}
	return cat.Snapshot()
}

func groupPing(lat float64, i int64, groups ...string) *geofencepb.Ping {
	return &geofencepb.Ping{DeviceId: "veh", Lat: lat, Lon: centerLon, AccuracyM: 5, DeviceTimeMs: i * 1000, Hlc: uint64(i), Groups: groups}
}

func triggersFor(out debounce.Outcome, fence string) []*geofencepb.Trigger {
	var ts []*geofencepb.Trigger
	for _, tr := range out.Triggers {
		if tr.FenceId == fence {
			ts = append(ts, tr)
		}
	}
	return ts
}

// A device outside a fence's groups never triggers it (nor gets state for
// it) while it triggers the fence without groups at the same place; a
// member device does, and its triggers carry the fence's name and tags and
// the device's groups.
func TestGroupFenceOnlyForMembers(t *testing.T) {
	snap := groupCatalogue(t)
	cfg := debounce.DefaultSettings()
	cfg.MinSamples, cfg.MinDwell, cfg.Loiter = 3, 0, 0
	for _, groups := range [][]string{nil, {"fleet-b"}} {
		st := &geofencepb.DeviceState{DeviceId: "veh"}
		var open int
		for i := int64(1); i <= 10; i++ {
			out := debounce.Apply(st, groupPing(insideLat, i, groups...), snap, cfg)
			if ts := triggersFor(out, "depot"); len(ts) != 0 {
				t.Fatalf("groups %v: ping %d triggered depot (groups fleet-a): %v", groups, i, ts)
			}
			for _, tr := range triggersFor(out, "zone-1") {
				if tr.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
					open++
				}
			}
		}
		if fs := debounce.FenceStateOf(st, "depot"); fs != nil || open != 1 {
			t.Fatalf("groups %v: depot state %v (want none), zone-1 triggers %d (want 1 ENTER)", groups, fs, open)
		}
	}
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	var enters []*geofencepb.Trigger
	for i := int64(1); i <= 3; i++ {
		for _, tr := range triggersFor(debounce.Apply(st, groupPing(insideLat, i, "fleet-b", "fleet-a"), snap, cfg), "depot") {
			if tr.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
				enters = append(enters, tr)
			}
		}
	}
	if len(enters) != 1 || enters[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
		t.Fatalf("member: depot triggers %v, want one ENTER", enters)
	}
	tr := enters[0]
	if tr.FenceName != "Depot" || !slices.Equal(tr.FenceTags, []string{"depot", "north"}) ||
		!slices.Equal(tr.DeviceGroups, []string{"fleet-b", "fleet-a"}) || tr.CatalogueVersion != 9 {
		t.Fatalf("ENTER carries name %q tags %v device groups %v version %d", tr.FenceName, tr.FenceTags, tr.DeviceGroups, tr.CatalogueVersion)
	}
}

// A device that leaves a fence's groups while inside it gets an EXIT
// (reason GROUP_LEFT) on its next ping, wherever that ping is, and its state
// for the fence is dropped; it is not measured against the fence again.
func TestLeavingGroupWhileInsideExits(t *testing.T) {
	cfg := debounce.DefaultSettings()
	cfg.MinSamples, cfg.MinDwell, cfg.Loiter = 3, 0, 0
	for _, tc := range []struct {
		name string
		lat  float64
	}{{"still inside", insideLat}, {"far away", centerLat + 1}} {
		t.Run(tc.name, func(t *testing.T) {
			snap := groupCatalogue(t)
			st := &geofencepb.DeviceState{DeviceId: "veh"}
			for i := int64(1); i <= 3; i++ {
				debounce.Apply(st, groupPing(insideLat, i, "fleet-a"), snap, cfg)
			}
			if fs := debounce.FenceStateOf(st, "depot"); fs.GetPhase() != geofencepb.Phase_PHASE_INSIDE {
				t.Fatalf("member not inside depot: %v", fs)
			}
			out := debounce.Apply(st, groupPing(tc.lat, 4), snap, cfg)
			ts := triggersFor(out, "depot")
			if len(ts) != 1 || ts[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_EXIT || ts[0].Reason != geofencepb.TriggerReason_TRIGGER_REASON_GROUP_LEFT || ts[0].FenceName != "Depot" {
				t.Fatalf("first ping without the group: depot triggers %v, want one EXIT GROUP_LEFT", ts)
			}
			if fs := debounce.FenceStateOf(st, "depot"); fs != nil || !out.Changed {
				t.Fatalf("depot state %v after leaving the group (changed %v)", fs, out.Changed)
			}
			for i := int64(5); i <= 10; i++ {
				if ts := triggersFor(debounce.Apply(st, groupPing(insideLat, i), snap, cfg), "depot"); len(ts) != 0 {
					t.Fatalf("ping %d after leaving: %v", i, ts)
				}
			}
		})
	}
}

// The silence sweep's EXIT carries the fence's name and tags and the groups
// of the device's last ping.
func TestTimeoutExitCarriesMetadata(t *testing.T) {
	snap := groupCatalogue(t)
	cfg := debounce.DefaultSettings()
	cfg.MinSamples, cfg.MinDwell, cfg.Loiter = 3, 0, 0
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	for i := int64(1); i <= 3; i++ {
		debounce.Apply(st, groupPing(insideLat, i, "fleet-a"), snap, cfg)
	}
	out, _ := debounce.Expire(st, 1e12, snap, cfg)
	var got *geofencepb.Trigger
	for _, tr := range out {
		if tr.FenceId == "depot" {
			got = tr
		}
	}
	if got == nil || got.FenceName != "Depot" || !slices.Equal(got.FenceTags, []string{"depot", "north"}) || !slices.Equal(got.DeviceGroups, []string{"fleet-a"}) {
		t.Fatalf("timeout EXIT %v, want name Depot, tags [depot north], device groups [fleet-a]", got)
	}
}

// A ping's groups are kept in the device's state, so they are bounded as a
// fence's are.
func TestPingGroupsBounded(t *testing.T) {
	p := groupPing(insideLat, 1, "fleet-a")
	if err := debounce.CheckPlausible(p, debounce.DefaultMaxAccuracyM); err != nil {
		t.Fatalf("one group: %v", err)
	}
	p.Groups = make([]string, fences.MaxLabels+1)
	if err := debounce.CheckPlausible(p, debounce.DefaultMaxAccuracyM); !errors.Is(err, debounce.ErrImplausible) {
		t.Fatalf("%d groups: %v, want ErrImplausible", len(p.Groups), err)
	}
	p.Groups = []string{strings.Repeat("g", fences.MaxLabelBytes+1)}
	if err := debounce.CheckPlausible(p, debounce.DefaultMaxAccuracyM); !errors.Is(err, debounce.ErrImplausible) {
		t.Fatalf("a long group: %v, want ErrImplausible", err)
	}
}
