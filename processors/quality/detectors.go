package quality

import (
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
)

// Detector names, in report order.
const (
	Raw         = "raw"
	Consecutive = "consec5"
	Hysteresis  = "n3+hyst5m"
	Strict      = "strict"
	SPRTBefore  = "sprt-v1"
	SPRT        = "sprt"
	MeanBound   = "mean-all"
)

// Detectors lists every detector the report compares, in its column order.
func Detectors() []string {
	return []string{Raw, Consecutive, Hysteresis, Strict, SPRTBefore, SPRT, MeanBound}
}

// trig is one ENTER or EXIT a detector fired (DWELL is not scored).
type trig struct {
	fence  string
	typ    geofencepb.TriggerType
	timeMs int64
}

// outcome is what a detector made of one device's pings.
type outcome struct {
	trigs  []trig
	inside map[string]bool // fences the device ends confirmed inside
}

// detector runs over one device's pings, in event-time order, HLC stamped.
// It must not modify the pings: detectors share them and run in parallel.
type detector interface {
	run(pings []*geofencepb.Ping) outcome
}

// debouncer is debounce.Apply, the processor's per-ping work, under one
// detector with each fence's own settings over defaults.
type debouncer struct {
	snap     *fences.Snapshot
	defaults debounce.Settings
}

func (d debouncer) run(pings []*geofencepb.Ping) outcome {
	if len(pings) == 0 {
		return outcome{}
	}
	st := &geofencepb.DeviceState{DeviceId: pings[0].GetDeviceId()}
	var out outcome
	for _, p := range pings {
		for _, t := range debounce.Apply(st, p, d.snap, d.defaults).Triggers {
			if t.Type == geofencepb.TriggerType_TRIGGER_TYPE_DWELL {
				continue
			}
			out.trigs = append(out.trigs, trig{t.FenceId, t.Type, t.EventTimeMs})
		}
	}
	out.inside = map[string]bool{}
	for _, e := range st.FenceStates {
		switch e.State.GetPhase() {
		case geofencepb.Phase_PHASE_INSIDE, geofencepb.Phase_PHASE_EXITING:
			out.inside[e.FenceId] = true
		}
	}
	return out
}

// counting is the family of simple detectors: a device is inside a fence
// after n consecutive fixes with the point inside (distance >= 0), and
// outside again after n consecutive fixes more than hyst metres outside.
// n = 1, hyst = 0 is a raw point-in-polygon detector (Tile38-style hooks):
// one trigger per change of containment of the noisy point.
type counting struct {
	snap *fences.Snapshot
	n    int
	hyst float64
}

// nearMarginM is how far around a fix the counting detectors look for
// fences; beyond it a fix is outside by more than any hysteresis they use.
const nearMarginM = 50

func (c counting) run(pings []*geofencepb.Ping) outcome {
	type state struct {
		inside bool
		run    int
	}
	states := map[string]*state{}
	var out outcome
	var ids []string
	for _, p := range pings {
		ids = ids[:0]
		c.snap.Near(p.GetLat(), p.GetLon(), nearMarginM, func(f *fences.Fence) bool {
			ids = append(ids, f.ID)
			return true
		})
		for id, s := range states { // live state the fix is far from
			if s.inside || s.run > 0 {
				ids = appendNew(ids, id)
			}
		}
		for _, id := range ids {
			f, ok := c.snap.Get(id)
			if !ok {
				continue
			}
			d := f.SignedDistance(p.GetLat(), p.GetLon())
			s := states[id]
			if s == nil {
				s = &state{}
				states[id] = s
			}
			toward := d >= 0 // evidence for the other side
			if s.inside {
				toward = d < -c.hyst
			}
			if !toward {
				s.run = 0
				continue
			}
			s.run++
			if s.run < c.n {
				continue
			}
			s.inside, s.run = !s.inside, 0
			typ := geofencepb.TriggerType_TRIGGER_TYPE_EXIT
			if s.inside {
				typ = geofencepb.TriggerType_TRIGGER_TYPE_ENTER
			}
			out.trigs = append(out.trigs, trig{id, typ, p.GetDeviceTimeMs()})
		}
	}
	out.inside = map[string]bool{}
	for id, s := range states {
		if s.inside {
			out.inside[id] = true
		}
	}
	return out
}

func appendNew(ids []string, id string) []string {
	for _, v := range ids {
		if v == id {
			return ids
		}
	}
	return append(ids, id)
}

// meanBound classifies a parked device by the mean signed distance of all
// its fixes to one fence. It fires nothing: it is a bound, not a detector.
type meanBound struct {
	fence *fences.Fence
}

func (m meanBound) run(pings []*geofencepb.Ping) outcome {
	sum := 0.0
	for _, p := range pings {
		sum += m.fence.SignedDistance(p.GetLat(), p.GetLon())
	}
	return outcome{inside: map[string]bool{m.fence.ID: len(pings) > 0 && sum/float64(len(pings)) >= 0}}
}

// detectorsFor builds the named detectors over snap; fence is the parked
// workload's fence (nil for the moving fleet, which has no mean bound).
func detectorsFor(snap *fences.Snapshot, fence *fences.Fence) map[string]detector {
	sprt := debounce.DefaultSettings()
	strict := sprt
	strict.Detector = debounce.DetectorStrict
	// The sprt detector of issue 13, before issue 20: α = β = 0.001, the
	// reported accuracy believed (σ ≥ 1 m), no censoring.
	before := sprt
	before.FalseAlarm, before.MissedDetection = 0.001, 0.001
	before.AccuracyFloorM, before.AccuracyScale, before.ClipSigmas = 0, 0, 0
	ds := map[string]detector{
		SPRTBefore:  debouncer{snap: snap, defaults: before},
		Raw:         counting{snap: snap, n: 1},
		Consecutive: counting{snap: snap, n: 5},
		Hysteresis:  counting{snap: snap, n: 3, hyst: 5},
		Strict:      debouncer{snap: snap, defaults: strict},
		SPRT:        debouncer{snap: snap, defaults: sprt},
	}
	if fence != nil {
		ds[MeanBound] = meanBound{fence: fence}
	}
	return ds
}
