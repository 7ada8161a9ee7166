package debounce

import (
	"math"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// The sequential-evidence detector ([DetectorSPRT]).
//
// # Evidence of one fix
//
// Near a straight stretch of edge only the fix's offset along the edge normal
// matters. Model the measured signed distance x (metres, positive inside, as
// Fence.SignedDistance) as Gaussian around the true distance with standard
// deviation σ, and weigh the two simple hypotheses "the device is δ inside"
// against "δ outside" (δ = Settings.ResolutionM). Their log-likelihood ratio is
//
//	λ(x) = log N(x; +δ, σ²) − log N(x; −δ, σ²) = 2δx / σ²
//
// Summed over fixes this is proportional to Σ x_i/σ_i², the inverse-variance
// weighted mean distance: the statistic the all-fixes bound uses, kept as a
// running sum so it can decide early. A fix near the edge is weak evidence,
// not none, and a coarse fix counts for less (1/σ², not 1/σ).
//
// σ comes from the fix's accuracy, not believed blindly:
//
//	σ = max(AccuracyFloorM, AccuracyScale × accuracy, 1 m)
//
// Convention: accuracy is the radius of the 68% circle (Ping.accuracy_m). For
// a circular Gaussian that radius is 1.51 σ per axis, so an honest
// receiver's σ along the normal is accuracy/1.51; AccuracyScale 1 (the
// default) takes σ = accuracy instead. That absorbs receivers up to 1.5×
// optimistic (common on Android) at no cost to the many receivers, and the
// fleet simulator, that report the 1σ per-axis error as "accuracy"; a fleet
// known to under-report further sets AccuracyScale above 1. The floor
// (default 5 m) is there because a phone reporting 2 m is rarely better than
// 5 m in the errors that matter near a fence (multipath, a bias that lasts a
// minute), and because it caps what under-reported accuracy can do: with the
// floor, a fix reporting half its true σ of 5 m weighs what an honest one
// does, where it used to weigh 4×, and 52 of 1,000 devices parked near an edge
// got a false ENTER (issue 20).
//
// # Outliers
//
// A multipath fix can land 100 m from the truth while reporting the normal
// accuracy. Under the Gaussian model it is strong evidence; three of them
// confirmed a stay. The evidence of each fix is therefore censored (Huber's
// robust version of the probability ratio test, 1965: the least favourable
// pair of ε-contaminated Gaussians has a clipped log-likelihood ratio):
//
//	λ(x) = 2δ · clip(x, ±ClipSigmas·σ) / σ²
//
// so a fix beyond ClipSigmas σ (default 2: 10 m at σ 5 m) counts as one at
// 2σ. A device parked 2 m outside with 5% of its fixes outliers of σ 60 m
// still drifts down by about 0.38 per fix with per-fix variance 1.1, and a
// wild fix inside is worth what 5 good fixes 2 m inside are, where the clamp
// alone let it weigh 8.5. Deep inside (or outside) every fix is censored, so
// the evidence alone would need ⌈span / (2δ·ClipSigmas/σ)⌉ fixes (6 at the
// defaults and σ 5 m); the run of clear fixes below keeps a real crossing at
// MinSamples.
//
// A fix is also checked against the device's track: one that lies farther
// from the device's previous fix than MaxSpeedMS (default 50 m/s) allows in
// the time between them, plus 3√2 σ for the noise of the two fixes, is no
// information at all (Sample.Implausible; Apply decides it once per ping,
// from the last position the device state keeps anyway, so it costs no state).
// At 1 Hz that rejects about half of the multipath outliers of a parked
// device (σ 60 m), and the next good fix, which jumps back; at one fix in 30 s
// it rejects little, and censoring does the work.
//
// # The test
//
// Wald's thresholds for error probabilities α (FalseAlarm) and β
// (MissedDetection) are A = log((1−β)/α) to accept the transition and
// B = log(β/(1−α)) to reject it. A settled state (nil OUTSIDE, or INSIDE)
// holds the evidence at B: the test has accepted "no transition". Evidence is
// stored above that floor (FenceState.evidence = S − B ≥ 0), so a transition
// needs the full span A − B (13.8 with the defaults) of net evidence; from the
// floor the candidate (ENTERING or EXITING) starts with the first fix that
// raises it, and is abandoned when the evidence falls back to the floor.
// A transition is confirmed when the evidence reaches A and, as under the
// strict rule, the candidate has MinSamples samples and lasted MinDwell in
// event time.
//
// It is also confirmed, under the same MinSamples and MinDwell, after
// max(MinSamples, 2) clear fixes in a row: fixes at or beyond the censoring
// point on the new side (FenceState.clear_run counts them). Censoring makes
// every fix of a real crossing count as one at 2σ, and span/(4δ/σ) of those
// (6 at σ 5 m) would be needed where MinSamples used to do; a device sending a
// fix every 30 s would wait 5 fixes instead of 3. A run of clear fixes is what
// the strict rule confirms on, and what isolated outliers cannot fake: with
// 5% of fixes outliers, three in a row all clear on the same side come once
// in about 10⁵ triples. The run costs no bytes when 0 and 2 bytes (a varint
// field) while a candidate has one; settled states never carry it.
//
// Exit evidence is measured against the edge moved outward by Hysteresis:
// x' = −x − Hysteresis, so a device sitting in the band (or just inside)
// builds none, and a device parked near the edge cannot flap.
//
// # Bounds, and why
//
//   - Each fix's λ is censored at ClipSigmas σ (above) and clamped to
//     ±(A−B)/max(MinSamples, 2): one wild fix (a multipath jump hundreds of
//     metres into the fence) cannot confirm alone, nor erase the evidence of
//     several good ones; MinSamples full-weight fixes are the fastest
//     confirmation, whatever the settings. The bound holds for any input
//     accuracy, since σ ≥ 1 m.
//   - The evidence never goes below the floor B: a long stay on one side does
//     not bank evidence against leaving it, which would delay the EXIT (or
//     ENTER) of a device that really moves by however long it stayed. This is
//     Page's CUSUM form of the test: each excursion off the floor is a fresh
//     SPRT.
//   - The evidence never goes above A: a candidate waiting for MinSamples or
//     MinDwell does not bank evidence that a few contrary fixes could not
//     undo.
//
// Every fix is treated as independent. Real GPS errors of a stationary
// receiver are correlated over tens of seconds, which makes a run of fixes
// worth less than the sum says; MinDwell is the guard against that.

// minSigmaM is the least noise scale of a fix, metres: a fix with accuracy 0
// (or below a metre) is not taken as exact, since fence edges are not drawn
// to better than that either. It applies under any AccuracyFloorM.
const minSigmaM = 1.0

// sprtTest holds the constants of the test for one Settings.
type sprtTest struct {
	span  float64 // A − B: evidence from the floor to the threshold
	clamp float64 // the most one fix adds or removes
	delta float64 // δ, metres
	floor float64 // least σ, metres (≥ minSigmaM)
	scale float64 // σ = scale × accuracy above the floor
	clip  float64 // censoring point in σ; 0: none
	run   uint32  // clear fixes in a row that confirm (≥ 2)
}

func newSPRT(cfg Settings) sprtTest {
	alpha, beta, delta := cfg.FalseAlarm, cfg.MissedDetection, cfg.ResolutionM
	// Out-of-range values from an unvalidated config fall back to defaults,
	// so Step stays total (Validate reports them).
	if !(alpha > 0 && alpha < 0.5) {
		alpha = DefaultFalseAlarm
	}
	if !(beta > 0 && beta < 0.5) {
		beta = DefaultMissedDetection
	}
	if !(delta > 0 && delta <= MaxResolutionM) {
		delta = DefaultResolutionM
	}
	span := defaultSpan // two logs cost more than the rest of Step
	if alpha != DefaultFalseAlarm || beta != DefaultMissedDetection {
		span = waldSpan(alpha, beta)
	}
	floor, scale, clip := cfg.AccuracyFloorM, cfg.AccuracyScale, cfg.ClipSigmas
	if !(floor >= minSigmaM && floor <= MaxAccuracyFloorM) {
		floor = minSigmaM
	}
	if !(scale > 0 && scale <= MaxAccuracyScale) {
		scale = 1
	}
	if !(clip > 0 && clip <= MaxClipSigmas) {
		clip = 0
	}
	run := uint32(2)
	if cfg.MinSamples > 2 {
		run = uint32(min(cfg.MinSamples, math.MaxUint32))
	}
	return sprtTest{span: span, clamp: span / float64(max(cfg.MinSamples, 2)), delta: delta, floor: floor, scale: scale, clip: clip, run: run}
}

// waldSpan is A − B: Wald's upper threshold log((1−β)/α) minus his lower
// one log(β/(1−α)).
func waldSpan(alpha, beta float64) float64 {
	return math.Log((1-beta)/alpha) - math.Log(beta/(1-alpha))
}

var defaultSpan = waldSpan(DefaultFalseAlarm, DefaultMissedDetection)

// SPRTThreshold returns the evidence span A − B the sprt detector needs to
// confirm a transition under cfg, and the most one fix can contribute
// whatever its accuracy (the clamp; censoring may make it less).
func SPRTThreshold(cfg Settings) (span, perFix float64) {
	t := newSPRT(cfg)
	return t.span, t.clamp
}

// llr is the censored and clamped evidence of one fix at signed distance x
// (metres from the reference line, positive towards the candidate side), and
// whether the fix is clear: at least the censoring point on that side.
func (t sprtTest) llr(x, accuracy float64) (l float64, clear bool) {
	sigma := t.scale * accuracy
	if !(sigma >= t.floor) { // also a negative accuracy
		sigma = t.floor
	}
	l = 2 * t.delta * x / (sigma * sigma)
	if t.clip > 0 {
		c := 2 * t.delta * t.clip / sigma
		clear = l >= c
		l = max(-c, min(c, l))
	}
	return max(-t.clamp, min(t.clamp, l)), clear
}

// stepSPRT is Step under the sprt detector: the same phases, state ownership,
// MinSamples, MinDwell, DWELL and stale-sample rules as the strict rule; only
// what counts as evidence differs (see the top of this file).
func stepSPRT(st *geofencepb.FenceState, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	d, acc := s.Distance, s.AccuracyM
	if math.IsNaN(d) || math.IsNaN(acc) || s.Implausible {
		return st, nil
	}
	hyst := cfg.Hysteresis
	if !(hyst >= 0) {
		hyst = 0
	}
	t := newSPRT(cfg)
	switch st.GetPhase() {
	case geofencepb.Phase_PHASE_ENTERING:
		if s.TimeMs < st.CandidateSinceMs {
			return st, nil
		}
		l, clear := t.llr(d, acc)
		return t.accumulate(st, false, l, clear, s, cfg)

	case geofencepb.Phase_PHASE_INSIDE:
		if s.TimeMs < st.InsideSinceMs {
			return st, nil
		}
		l, clear := t.llr(-d-hyst, acc)
		if !(l > 0) {
			return dwell(st, s, cfg)
		}
		return t.accumulate(candidate(geofencepb.Phase_PHASE_EXITING, st, s), true, l, clear, s, cfg)

	case geofencepb.Phase_PHASE_EXITING:
		if s.TimeMs < st.CandidateSinceMs {
			return st, nil
		}
		l, clear := t.llr(-d-hyst, acc)
		return t.accumulate(st, false, l, clear, s, cfg)

	default: // OUTSIDE, nil, or an unknown phase: evidence at the floor
		l, clear := t.llr(d, acc)
		if !(l > 0) {
			return nil, nil
		}
		return t.accumulate(candidate(geofencepb.Phase_PHASE_ENTERING, nil, s), true, l, clear, s, cfg)
	}
}

// accumulate adds one fix's evidence l to the candidate st (ENTERING or
// EXITING), abandons it at the floor and confirms it at the threshold, or
// after a run of clear fixes, once MinSamples and MinDwell are met. fresh
// says st was just allocated by Step.
func (t sprtTest) accumulate(st *geofencepb.FenceState, fresh bool, l float64, clear bool, s Sample, cfg Settings) (*geofencepb.FenceState, []Transition) {
	e := min(st.Evidence+l, t.span)
	if !(e > 0) { // back at the floor: the test rejected the transition
		if st.Phase == geofencepb.Phase_PHASE_EXITING {
			return backInside(st, s, cfg)
		}
		return nil, nil
	}
	n, ready := count(st, s, cfg)
	var run uint32
	if clear {
		run = min(st.ClearRun+1, t.run)
	}
	if ready && (e >= t.span || run >= t.run) {
		return confirm(st, s)
	}
	return withCount(st, fresh, n, e, run), nil // a saturated candidate waiting for MinDwell is no write
}
