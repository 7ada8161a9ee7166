package debounce_test

import (
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
)

// TestApplyStepsEachFenceOncePerPing: a fence that gets state during a ping
// must not be stepped again by the sweep over live state in the same Apply,
// or every candidate would count its first sample twice.
func TestApplyStepsEachFenceOncePerPing(t *testing.T) {
	snap := testCatalogue(t).Snapshot()
	cfg := debounce.DefaultSettings()
	cfg.MinSamples, cfg.MinDwell = 3, 0
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	for i := int64(1); i <= 3; i++ {
		out := debounce.Apply(st, &geofencepb.Ping{DeviceId: "veh", Lat: insideLat, Lon: centerLon, DeviceTimeMs: i * 1000, Hlc: uint64(i)}, snap, cfg)
		fs := debounce.FenceStateOf(st, "zone-1")
		switch {
		case i < 3 && (len(out.Triggers) != 0 || fs.GetCandidateSamples() != uint32(i)):
			t.Fatalf("sample %d: %d triggers, candidate samples %d; want 0 and %d", i, len(out.Triggers), fs.GetCandidateSamples(), i)
		case i == 3 && (len(out.Triggers) != 1 || out.Triggers[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_ENTER):
			t.Fatalf("third sample: triggers %v, want one ENTER", out.Triggers)
		}
	}
}

// TestUpgradeReadsV1State: state written with the v1 map layout is read, moved
// into fence_states (sorted) and carries on through the machine.
func TestUpgradeReadsV1State(t *testing.T) {
	//lint:ignore SA1019 the v1 layout under test
	st := &geofencepb.DeviceState{DeviceId: "veh", Fences: map[string]*geofencepb.FenceState{
		"zone-1": {Phase: geofencepb.Phase_PHASE_INSIDE, InsideSinceMs: 1000},
		"a-zone": {Phase: geofencepb.Phase_PHASE_ENTERING, CandidateSinceMs: 500, CandidateSamples: 1},
	}}
	debounce.Upgrade(st)
	//lint:ignore SA1019 checking it was cleared
	if len(st.Fences) != 0 || len(st.FenceStates) != 2 || st.FenceStates[0].FenceId != "a-zone" {
		//lint:ignore SA1019 see above
		t.Fatalf("after Upgrade: map %v, entries %v", st.Fences, st.FenceStates)
	}
	// The device is far outside zone-1 now: three samples later it exits.
	cfg := debounce.DefaultSettings()
	cfg.MinDwell = 0
	snap := testCatalogue(t).Snapshot()
	var exits int
	for i := int64(1); i <= 3; i++ {
		out := debounce.Apply(st, &geofencepb.Ping{DeviceId: "veh", Lat: outsideLat, Lon: centerLon, DeviceTimeMs: 2000 + i*int64(time.Second/time.Millisecond), Hlc: uint64(i)}, snap, cfg)
		for _, tr := range out.Triggers {
			if tr.FenceId == "zone-1" && tr.Type == geofencepb.TriggerType_TRIGGER_TYPE_EXIT {
				exits++
			}
		}
	}
	if exits != 1 || debounce.FenceStateOf(st, "zone-1") != nil {
		t.Fatalf("v1 INSIDE state did not carry on: exits %d, state %v", exits, debounce.FenceStateOf(st, "zone-1"))
	}
}

// A fix farther from the device's previous one than MaxSpeedMS allows is no
// evidence (a teleport is a multipath jump); the same jump over a longer gap
// is plausible.
func TestImplausibleJumpIsNoEvidence(t *testing.T) {
	snap := testCatalogue(t).Snapshot()
	cfg := debounce.DefaultSettings()
	ping := func(lat float64, ms int64) *geofencepb.Ping {
		return &geofencepb.Ping{DeviceId: "veh", Lat: lat, Lon: centerLon, AccuracyM: 5, DeviceTimeMs: ms, Hlc: uint64(ms)}
	}
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	debounce.Apply(st, ping(outsideLat, 1000), snap, cfg)
	debounce.Apply(st, ping(insideLat, 2000), snap, cfg) // 1 km in 1 s
	if fs := debounce.FenceStateOf(st, "zone-1"); fs != nil {
		t.Fatalf("a 1 km jump in 1 s started a candidate: %v", fs)
	}
	// From there, the next fix 1 s later is plausible again.
	debounce.Apply(st, ping(insideLat, 3000), snap, cfg)
	if fs := debounce.FenceStateOf(st, "zone-1"); fs.GetPhase() != geofencepb.Phase_PHASE_ENTERING {
		t.Fatalf("a fix where the last one was: %v, want ENTERING", fs)
	}
	st = &geofencepb.DeviceState{DeviceId: "veh"}
	debounce.Apply(st, ping(outsideLat, 1000), snap, cfg)
	debounce.Apply(st, ping(insideLat, 61_000), snap, cfg) // 1 km in a minute
	if fs := debounce.FenceStateOf(st, "zone-1"); fs.GetPhase() != geofencepb.Phase_PHASE_ENTERING {
		t.Fatalf("1 km in a minute: %v, want ENTERING", fs)
	}
	cfg.MaxSpeedMS = 0 // off
	st = &geofencepb.DeviceState{DeviceId: "veh"}
	debounce.Apply(st, ping(outsideLat, 1000), snap, cfg)
	debounce.Apply(st, ping(insideLat, 2000), snap, cfg)
	if fs := debounce.FenceStateOf(st, "zone-1"); fs.GetPhase() != geofencepb.Phase_PHASE_ENTERING {
		t.Fatalf("speed check off: %v, want ENTERING", fs)
	}
}
