package debounce

import (
	"math"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Sample is one ping measured against one fence.
type Sample struct {
	TimeMs    int64   // event time of the ping (never wall clock)
	Distance  float64 // signed metres to the fence edge: >0 inside, <0 outside
	AccuracyM float64 // GPS accuracy: radius of the 68% circle, metres (0 = exact)
	// Implausible marks a fix too far from the device's previous one for
	// the time between them (see [Settings.MaxSpeedMS]): the sprt detector
	// takes it as no information. The strict rule ignores the mark.
	Implausible bool
}

// Transition is one trigger fired by [Step] or [Timeout].
type Transition struct {
	Type   geofencepb.TriggerType // UNSPECIFIED when nothing fired
	Reason geofencepb.TriggerReason
}

// evidence is the classification of one sample against the edge.
type evidence uint8

const (
	evInside        evidence = iota // whole accuracy circle inside
	evOutside                       // beyond hysteresis, circle clear of the edge
	evLeanInside                    // ambiguous, centre inside (straddling)
	evLeanOutside                   // ambiguous, centre outside (band or straddling)
	evNoInformation                 // NaN: ignored
)

func classify(s Sample, hysteresis float64) evidence {
	d, acc := s.Distance, s.AccuracyM
	if math.IsNaN(d) || math.IsNaN(acc) {
		return evNoInformation
	}
	if acc < 0 { // a negative radius is meaningless; treat it as an exact fix
		acc = 0
	}
	if !(hysteresis >= 0) { // negative or NaN from an unvalidated config
		hysteresis = 0
	}
	switch {
	case d >= 0 && d >= acc:
		return evInside
	case d < 0 && -d >= max(hysteresis, acc):
		return evOutside
	case d >= 0:
		return evLeanInside
	default:
		return evLeanOutside
	}
}

// Step advances the debounce state machine of one (device, fence) by one
// sample and returns the new state and the triggers that fired.
//
// # State and ownership
//
// st may be nil, which means settled OUTSIDE. The returned state is nil when
// the device is settled OUTSIDE again, so callers can delete it from their
// table. Step never modifies *st: when the state changes it returns a new
// FenceState, and when nothing changes it returns st itself, so next != st
// tells the caller whether the state must be written back. The no-change path
// (the overwhelmingly common one) does not allocate.
//
// The returned slice is nil when nothing fired. Under the rules below it holds
// at most one transition (ENTER, EXIT or DWELL, all with reason CONFIRMED),
// but callers must range over it: it is a slice so that a future rule firing
// two triggers on one sample does not change the API. It is freshly allocated
// and belongs to the caller.
//
// # Detectors
//
// cfg.Detector picks the rule that decides what a sample is evidence of.
// Under [DetectorSPRT] (the default) every sample weighs in by its distance
// and accuracy and a transition is confirmed when the accumulated evidence
// passes a threshold; it is described in sprt.go. Everything below is the
// [DetectorStrict] rule (also the zero Detector); the phases, state
// ownership, MinSamples, MinDwell, DWELL, stale-sample and robustness rules
// are the same under both.
//
// # Classifying a sample
//
//   - inside evidence: Distance ≥ AccuracyM and Distance ≥ 0. The whole
//     accuracy circle is inside; a point exactly on the edge with accuracy 0
//     counts as inside.
//   - outside evidence: Distance < 0 and -Distance ≥ max(Hysteresis,
//     AccuracyM). The point is beyond the hysteresis band and its accuracy
//     circle does not reach back over the edge.
//   - ambiguous: everything else (in the band, or the accuracy circle
//     straddles the edge). An ambiguous sample never starts, never counts
//     towards and never confirms a transition, so a point hovering in the
//     band, or a fix too coarse to tell, cannot produce ENTER or EXIT.
//
// # Transitions
//
//   - OUTSIDE + inside evidence → ENTERING (CandidateSinceMs = the sample's
//     time, CandidateSamples = 1).
//   - ENTERING + inside evidence → one more sample; once CandidateSamples ≥
//     MinSamples and time - CandidateSinceMs ≥ MinDwell → INSIDE with
//     InsideSinceMs = that sample's time, firing ENTER.
//   - ENTERING + outside evidence → OUTSIDE (nil), nothing fired.
//   - INSIDE + outside evidence → EXITING; EXITING + outside evidence counts
//     and confirms exactly like ENTERING, firing EXIT and returning nil.
//   - EXITING + inside evidence → INSIDE, keeping InsideSinceMs and
//     DwellFired of the stay (the exit never happened).
//
// Ambiguous samples are split by the side of the edge their centre lies on,
// which decides whether a pending candidate survives them:
//
//   - ENTERING + ambiguous, centre inside (straddling): kept, not counted. A
//     device really inside with a coarse fix keeps its progress.
//   - ENTERING + ambiguous, centre outside (in the band): the candidate is
//     abandoned (OUTSIDE, nothing fired). "Consecutive" samples means no
//     sample in between put the device back outside. Were such samples merely
//     skipped, a device parked just outside the edge would collect its rare
//     jittered inside fixes one at a time until MinSamples was reached, and
//     fire a spurious ENTER however rare those fixes are.
//   - EXITING + ambiguous, centre inside: back to INSIDE, the same reasoning
//     mirrored (a device parked just inside must not turn rare far-outside
//     fixes into a spurious EXIT).
//   - EXITING + ambiguous, centre outside (in the band): kept, not counted. A
//     device driving away may report a fix in the band now and then.
//
// Abandoning a candidate fires nothing, so neither rule can cause flapping:
// triggers only come from unbroken runs of evidence.
//
// With MinSamples 1 and MinDwell 0 the machine degenerates to a raw detector
// with hysteresis: the first inside-evidence sample fires ENTER, the first
// outside-evidence sample fires EXIT.
//
// # DWELL
//
// DWELL fires at most once per stay, only while the phase is INSIDE (never
// while EXITING: the device may be leaving), on a sample after the one that
// confirmed ENTER, once that sample's time - InsideSinceMs ≥ Loiter. Any
// sample that leaves the phase INSIDE can fire it, an ambiguous one or the
// one that cancels an EXITING included: for DWELL the sample only advances
// the event-time clock. A new stay (after an EXIT) may fire a new DWELL.
//
// # Robustness
//
// Step is pure: no clock, no I/O, deterministic. It never panics on input.
// A sample older than the state's reference time (CandidateSinceMs while
// ENTERING or EXITING, InsideSinceMs while INSIDE) is ignored entirely: the
// processor drops stale pings by HLC already, and this keeps Step from
// computing negative spans or starting a candidate in the past. A NaN
// distance or accuracy is ignored, a negative accuracy counts as 0, and
// out-of-range settings are clamped (MinSamples < 1 as 1, negative durations
// and hysteresis as 0); check settings with [Settings.Validate] before use.
// An unknown phase (from a newer schema) is treated as settled OUTSIDE.
func Step(st *geofencepb.FenceState, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	if cfg.Detector == DetectorSPRT {
		return stepSPRT(st, s, cfg)
	}
	return stepStrict(st, s, cfg)
}

// stepStrict is Step under the strict rule.
func stepStrict(st *geofencepb.FenceState, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	ev := classify(s, cfg.Hysteresis)
	if ev == evNoInformation {
		return st, nil
	}
	switch st.GetPhase() { // nil-safe: nil is OUTSIDE
	case geofencepb.Phase_PHASE_ENTERING:
		if s.TimeMs < st.CandidateSinceMs {
			return st, nil
		}
		switch ev {
		case evInside:
			return advance(st, false, s, cfg)
		case evOutside, evLeanOutside:
			return nil, nil
		}
		return st, nil

	case geofencepb.Phase_PHASE_INSIDE:
		if s.TimeMs < st.InsideSinceMs {
			return st, nil
		}
		if ev == evOutside {
			return advance(candidate(geofencepb.Phase_PHASE_EXITING, st, s), true, s, cfg)
		}
		return dwell(st, s, cfg)

	case geofencepb.Phase_PHASE_EXITING:
		if s.TimeMs < st.CandidateSinceMs {
			return st, nil
		}
		switch ev {
		case evOutside:
			return advance(st, false, s, cfg)
		case evInside, evLeanInside:
			return backInside(st, s, cfg)
		}
		return st, nil

	default: // OUTSIDE, nil, or an unknown phase
		if ev != evInside {
			return nil, nil // also normalises a non-nil OUTSIDE to nil
		}
		return advance(candidate(geofencepb.Phase_PHASE_ENTERING, nil, s), true, s, cfg)
	}
}

// candidate returns a new ENTERING or EXITING state starting at s, with no
// samples counted yet, carrying the stay of from (nil for ENTERING).
func candidate(phase geofencepb.Phase, from *geofencepb.FenceState, s Sample) *geofencepb.FenceState {
	return &geofencepb.FenceState{
		Phase:            phase,
		CandidateSinceMs: s.TimeMs,
		InsideSinceMs:    from.GetInsideSinceMs(),
		DwellFired:       from.GetDwellFired(),
	}
}

// advance counts the confirming sample s for the candidate st (ENTERING or
// EXITING) and confirms the transition when both MinSamples and MinDwell are
// met. fresh says st was just allocated by Step and may be updated in place;
// otherwise st belongs to the caller and is copied, never modified.
func advance(st *geofencepb.FenceState, fresh bool, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	n, ready := count(st, s, cfg)
	if ready {
		return confirm(st, s)
	}
	return withCount(st, fresh, n, st.Evidence, st.ClearRun), nil
}

// withCount returns the candidate st with n samples, evidence e and a run
// of clear fixes: st itself when none changed (no write), st updated in place
// when fresh (just allocated by Step), else a copy, since st belongs to the
// caller.
func withCount(st *geofencepb.FenceState, fresh bool, n uint32, e float64, run uint32) *geofencepb.FenceState {
	switch {
	case n == st.CandidateSamples && e == st.Evidence && run == st.ClearRun:
		return st
	case fresh:
		st.CandidateSamples, st.Evidence, st.ClearRun = n, e, run
		return st
	}
	return &geofencepb.FenceState{
		Phase:            st.Phase,
		CandidateSinceMs: st.CandidateSinceMs,
		CandidateSamples: n,
		InsideSinceMs:    st.InsideSinceMs,
		DwellFired:       st.DwellFired,
		Evidence:         e,
		ClearRun:         run,
	}
}

// count counts sample s for the candidate st, saturating at MinSamples (so a
// full candidate waiting for MinDwell is a no-change), and reports whether
// MinSamples and MinDwell are both met.
func count(st *geofencepb.FenceState, s Sample, cfg Settings) (n uint32, ready bool) {
	need := uint32(1)
	if cfg.MinSamples > 1 {
		need = uint32(min(cfg.MinSamples, math.MaxUint32))
	}
	n = st.CandidateSamples
	if n < need {
		n++
	}
	return n, n >= need && elapsed(st.CandidateSinceMs, s.TimeMs, cfg.MinDwell)
}

// confirm completes the candidate st at sample s: EXIT and settled OUTSIDE
// (nil), or ENTER and INSIDE since s.
func confirm(st *geofencepb.FenceState, s Sample) (*geofencepb.FenceState, []Transition) {
	if st.Phase == geofencepb.Phase_PHASE_EXITING {
		return nil, []Transition{{geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED}}
	}
	return &geofencepb.FenceState{
		Phase:         geofencepb.Phase_PHASE_INSIDE,
		InsideSinceMs: s.TimeMs,
	}, []Transition{{geofencepb.TriggerType_TRIGGER_TYPE_ENTER, geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED}}
}

// backInside cancels the EXITING candidate st: INSIDE again, in the same stay
// (the exit never happened), and s may fire its DWELL.
func backInside(st *geofencepb.FenceState, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	return dwell(&geofencepb.FenceState{
		Phase:         geofencepb.Phase_PHASE_INSIDE,
		InsideSinceMs: st.InsideSinceMs,
		DwellFired:    st.DwellFired,
	}, s, cfg)
}

// dwell fires DWELL for the INSIDE state st if it has not fired in this stay
// and the loiter time has passed, else returns st. The sample that confirms
// ENTER never gets here (advance returns directly).
func dwell(st *geofencepb.FenceState, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	if st.DwellFired || !elapsed(st.InsideSinceMs, s.TimeMs, cfg.Loiter) {
		return st, nil
	}
	fired := &geofencepb.FenceState{
		Phase:         geofencepb.Phase_PHASE_INSIDE,
		InsideSinceMs: st.InsideSinceMs,
		DwellFired:    true,
	}
	return fired, []Transition{{geofencepb.TriggerType_TRIGGER_TYPE_DWELL, geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED}}
}

// elapsed reports whether toMs - fromMs ≥ d without overflowing, for any
// int64 times. A negative d counts as 0; toMs before fromMs is never enough.
func elapsed(fromMs, toMs int64, d time.Duration) bool {
	if toMs < fromMs {
		return false
	}
	if d <= 0 {
		return true
	}
	// Unsigned subtraction is exact for toMs ≥ fromMs, even across zero.
	span := uint64(toMs) - uint64(fromMs)
	need := uint64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		need++ // sub-millisecond remainders round up: 1.5 ms needs 2 ms
	}
	return span >= need
}

// Timeout closes a (device, fence) whose device has been silent. If st is
// INSIDE or EXITING and nowMs - lastSeenMs ≥ cfg.SilenceTimeout, it returns a
// nil state and EXIT/TIMEOUT with true. A silent ENTERING candidate is
// discarded the same way but fires nothing (nil, zero Transition, false): it
// was never confirmed, and a ping arriving much later must not complete it.
// Otherwise it returns st unchanged, a zero Transition and false.
//
// lastSeenMs is the event time of the device's last ping; nowMs is the
// sweep's notion of now (an injected clock or the partition's event-time
// watermark, never time.Now inside a callback). A non-positive
// SilenceTimeout disables the sweep. Timeout never modifies *st.
func Timeout(st *geofencepb.FenceState, lastSeenMs, nowMs int64, cfg Settings) (*geofencepb.FenceState, Transition, bool) {
	if cfg.SilenceTimeout <= 0 || !elapsed(lastSeenMs, nowMs, cfg.SilenceTimeout) {
		return st, Transition{}, false
	}
	switch st.GetPhase() {
	case geofencepb.Phase_PHASE_INSIDE, geofencepb.Phase_PHASE_EXITING:
		return nil, Transition{geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT}, true
	case geofencepb.Phase_PHASE_ENTERING:
		return nil, Transition{}, false
	}
	return st, Transition{}, false
}
