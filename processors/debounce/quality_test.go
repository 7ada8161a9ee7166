package debounce_test

import (
	"sort"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/topology/hlc"
)

type detected struct {
	fence  string
	typ    geofencepb.TriggerType
	timeMs int64
}

// runTrace feeds every ping of the simulation through Apply (the processor's
// per-ping work) and returns each device's triggers and final state.
func runTrace(pings []*geofencepb.Ping, snap *fences.Snapshot, cfg debounce.Settings) (map[string][]detected, map[string]*geofencepb.DeviceState) {
	trigs := map[string][]detected{}
	states := map[string]*geofencepb.DeviceState{}
	for _, p := range pings {
		st := states[p.DeviceId]
		if st == nil {
			st = &geofencepb.DeviceState{DeviceId: p.DeviceId}
			states[p.DeviceId] = st
		}
		p.Hlc = hlc.Pack(p.DeviceTimeMs, 0)
		for _, t := range debounce.Apply(st, p, snap, cfg).Triggers {
			if t.Type == geofencepb.TriggerType_TRIGGER_TYPE_DWELL {
				continue
			}
			trigs[p.DeviceId] = append(trigs[p.DeviceId], detected{t.FenceId, t.Type, t.EventTimeMs})
		}
	}
	return trigs, states
}

// rawTrace is what a raw point-in-polygon detector (a Tile38-style hook) emits
// on the same pings: one trigger per change of containment of the noisy point.
func rawTrace(pings []*geofencepb.Ping, snap *fences.Snapshot) map[string]int {
	inside := map[[2]string]bool{}
	out := map[string]int{}
	for _, f := range snap.All() {
		for _, p := range pings {
			key := [2]string{p.DeviceId, f.ID}
			in := f.Contains(p.Lat, p.Lon)
			if in != inside[key] {
				out[p.DeviceId]++
				inside[key] = in
			}
		}
	}
	return out
}

// TestQualityAgainstGroundTruth scores the debouncer on a seeded fleet over the
// demo fences: moving devices that really cross fences, and devices parked
// within 10 m of an edge under σ = 5 m GPS noise.
func TestQualityAgainstGroundTruth(t *testing.T) {
	cat := fences.New()
	if err := cat.Apply(1, fences.Demo(), nil); err != nil {
		t.Fatal(err)
	}
	snap := cat.Snapshot()
	sim, err := fleet.New(fleet.Config{
		Seed: 42, Moving: 60, Parked: 40, ParkedOffsetM: 5, NoiseSigmaM: 5,
		Interval: time.Second, Duration: 40 * time.Minute,
	}, snap.All())
	if err != nil {
		t.Fatal(err)
	}
	cfg := debounce.DefaultSettings()
	settingsOf := func(id string) debounce.Settings {
		f, _ := snap.Get(id)
		return debounce.Resolved(cfg, &f)
	}
	pings := sim.Pings()
	truth := sim.Truth()
	got, states := runTrace(pings, snap, cfg)
	raw := rawTrace(pings, snap)

	// Moving devices: match every true transition, in order, per (device, fence).
	type pair struct{ dev, fence string }
	want := map[pair][]fleet.Transition{}
	for _, tr := range truth.Transitions {
		want[pair{tr.DeviceID, tr.FenceID}] = append(want[pair{tr.DeviceID, tr.FenceID}], tr)
	}
	have := map[pair][]detected{}
	for dev, ds := range got {
		for _, d := range ds {
			have[pair{dev, d.fence}] = append(have[pair{dev, d.fence}], d)
		}
	}
	var missed, spurious, duplicates, late int
	var lat, beyond []time.Duration // after the true crossing; and beyond the fence's dwell
	interval := sim.Config().Interval
	for k, ws := range want {
		hs := have[k]
		for i, w := range ws {
			if i >= len(hs) {
				missed++
				continue
			}
			h := hs[i]
			if h.typ != w.Type {
				missed++
				continue
			}
			d := time.Duration(h.timeMs-w.TimeMs) * time.Millisecond
			lat = append(lat, d)
			beyond = append(beyond, d-settingsOf(k.fence).MinDwell)
			// The bound is the fence's configured dwell plus one sample, counted
			// from when the true path cleared the zone where a sample can be
			// evidence: the accuracy circle inside the edge (ENTER), the
			// hysteresis band outside it (EXIT), and 3σ of noise beyond either.
			cleared := clearedAt(t, sim, snap, w, settingsOf(k.fence), interval)
			bound := time.Duration(cleared-w.TimeMs)*time.Millisecond + settingsOf(k.fence).MinDwell + interval
			if d < 0 || d > bound {
				late++
				t.Logf("late %s %s %v: %v after the true crossing (bound %v)", k.dev, k.fence, w.Type, d, bound)
			}
		}
		if len(hs) > len(ws) {
			duplicates += len(hs) - len(ws)
		}
	}
	for k, hs := range have {
		if _, ok := want[k]; !ok {
			if _, parked := truth.Parked[k.dev]; !parked {
				spurious += len(hs)
			}
		}
	}
	// Parked devices: at most one trigger each; far ones settle on their true side.
	var parkedTriggers, flapping, wrongSide int
	var rawParked, rawMoving int
	finalInside := map[[2]string]bool{}
	for f, devs := range truth.FinalInside {
		for _, d := range devs {
			finalInside[[2]string{d, f}] = true
		}
	}
	var wrongOther int
	for dev, pt := range truth.Parked {
		// Triggers for other fences a parked device truly sits deep inside
		// (fences overlap) are correct: exactly one ENTER each.
		n := 0
		others := map[string][]detected{}
		for _, d := range got[dev] {
			if d.fence == pt.FenceID {
				n++
			} else {
				others[d.fence] = append(others[d.fence], d)
			}
		}
		for f, ds := range others {
			if !finalInside[[2]string{dev, f}] || len(ds) != 1 || ds[0].typ != geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
				wrongOther += len(ds)
				t.Logf("parked %s: unexpected triggers for %s: %v", dev, f, ds)
			}
		}
		parkedTriggers += n
		rawParked += raw[dev]
		if n > 1 {
			flapping++
			t.Logf("parked %s (%.0f m %s %s) emitted %d triggers for it: %v", dev, pt.DistanceM, side(pt.Inside), pt.FenceID, n, got[dev])
		}
		if pt.DistanceM > settingsOf(pt.FenceID).Hysteresis+3*sim.Config().NoiseSigmaM {
			inside := debounce.FenceStateOf(states[dev], pt.FenceID).GetPhase() == geofencepb.Phase_PHASE_INSIDE
			if inside != pt.Inside {
				wrongSide++
				t.Logf("far parked %s settled %s, truly %s", dev, side(inside), side(pt.Inside))
			}
		}
	}
	for dev, n := range raw {
		if _, parked := truth.Parked[dev]; !parked {
			rawMoving += n
		}
	}
	// Parked devices near an edge may settle once on either side while in the
	// band; anything beyond one per device is spurious.
	spuriousParked := wrongOther
	for dev, pt := range truth.Parked {
		n := 0
		for _, d := range got[dev] {
			if d.fence == pt.FenceID {
				n++
			}
		}
		if n > 1 {
			spuriousParked += n - 1
		}
	}
	spurious += spuriousParked + duplicates
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	trueN := len(truth.Transitions)
	t.Logf("true transitions %d; missed %d; duplicates %d; late %d; spurious %d (%.2f%%)", trueN, missed, duplicates, late, spurious, 100*float64(spurious)/float64(trueN))
	sort.Slice(beyond, func(i, j int) bool { return beyond[i] < beyond[j] })
	if len(lat) > 0 {
		t.Logf("latency after the true crossing: p50 %v, p99 %v, max %v; beyond the fence's min dwell: p50 %v, p99 %v, max %v",
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], beyond[len(beyond)/2], beyond[len(beyond)*99/100], beyond[len(beyond)-1])
	}
	t.Logf("parked devices %d: triggers %d, flapping devices %d, far parked on the wrong side %d", len(truth.Parked), parkedTriggers, flapping, wrongSide)
	t.Logf("raw point-in-polygon on the same trace: moving %d triggers (vs %d true), parked %d triggers", rawMoving, trueN, rawParked)

	if trueN < 100 {
		t.Fatalf("only %d true transitions: the fleet does not exercise the debouncer", trueN)
	}
	if missed != 0 || duplicates != 0 || late != 0 {
		t.Errorf("moving devices: missed %d, duplicates %d, late %d; want 0, 0, 0", missed, duplicates, late)
	}
	if flapping != 0 || wrongSide != 0 || wrongOther != 0 {
		t.Errorf("parked devices: %d flapping, %d far ones on the wrong side, %d wrong triggers for other fences; want 0", flapping, wrongSide, wrongOther)
	}
	if float64(spurious) > 0.01*float64(trueN) {
		t.Errorf("spurious triggers %d > 1%% of %d true transitions", spurious, trueN)
	}
	if rawParked < 10*len(truth.Parked) {
		t.Errorf("the raw detector emitted only %d triggers for parked devices: the trace has too little jitter to prove anything", rawParked)
	}
}

func side(inside bool) string {
	if inside {
		return "inside"
	}
	return "outside"
}

// clearedAt is the event time of the first sample at or after a true
// transition whose true position is beyond the zone where noisy samples can be
// ambiguous.
func clearedAt(t *testing.T, sim *fleet.Sim, snap *fences.Snapshot, w fleet.Transition, cfg debounce.Settings, interval time.Duration) int64 {
	t.Helper()
	f, _ := snap.Get(w.FenceID)
	noise := 3 * sim.Config().NoiseSigmaM
	acc := sim.Config().AccuracyM
	for ms := w.TimeMs; ms < w.TimeMs+int64(10*time.Minute/time.Millisecond); ms += interval.Milliseconds() {
		lat, lon, ok := sim.TruePosition(w.DeviceID, ms)
		if !ok {
			break
		}
		d := f.SignedDistance(lat, lon)
		if w.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER && d >= acc+noise {
			return ms
		}
		if w.Type == geofencepb.TriggerType_TRIGGER_TYPE_EXIT && -d >= max(cfg.Hysteresis, acc)+noise {
			return ms
		}
	}
	t.Fatalf("%s never cleared the band of %s after %v", w.DeviceID, w.FenceID, w.Type)
	return 0
}
