package debounce

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
)

// runSPRT feeds samples through Step and returns the final state and every
// trigger type fired, in order.
func runSPRT(st *geofencepb.FenceState, cfg Settings, ss ...Sample) (*geofencepb.FenceState, []geofencepb.TriggerType) {
	var got []geofencepb.TriggerType
	for _, s := range ss {
		var trs []Transition
		st, trs = Step(st, s, cfg)
		for _, tr := range trs {
			got = append(got, tr.Type)
		}
	}
	return st, got
}

// parked returns n fixes at 1 Hz of a device truly d metres from the edge
// (positive inside) under Gaussian noise sigma along the normal, reporting
// accuracy sigma.
func parked(seed uint64, startMs int64, n int, d, sigma float64) []Sample {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{TimeMs: startMs + int64(i)*1000, Distance: d + sigma*rng.NormFloat64(), AccuracyM: sigma}
	}
	return out
}

func TestSPRTThresholdFromErrorProbabilities(t *testing.T) {
	cfg := DefaultSettings()
	span, perFix := SPRTThreshold(cfg)
	// Wald: A = log((1-β)/α), B = log(β/(1-α)); α = β = 0.006.
	want := 2 * math.Log(0.994/0.006)
	if math.Abs(span-want) > 1e-9 {
		t.Fatalf("span %v, want %v", span, want)
	}
	if math.Abs(perFix-want/3) > 1e-9 {
		t.Fatalf("per-fix clamp %v, want span/MinSamples = %v", perFix, want/3)
	}
	cfg.FalseAlarm = 1e-6
	if s, _ := SPRTThreshold(cfg); s <= span {
		t.Fatalf("a smaller false-alarm probability must raise the threshold: %v <= %v", s, span)
	}
	cfg.MinSamples = 1 // a single fix still cannot reach the threshold
	if s, c := SPRTThreshold(cfg); c >= s {
		t.Fatalf("per-fix clamp %v reaches the threshold %v", c, s)
	}
}

// Near the edge the sprt detector enters devices the strict rule never
// enters, and leaves devices just outside alone.
func TestSPRTParkedNearEdge(t *testing.T) {
	sprt, strict := DefaultSettings(), strictDefaults()
	const devices = 200
	var sprtIn, strictIn, falseEnter int
	for i := range devices {
		// Inside at 3 m: the strict rule throws away every fix within 5 m.
		st, trs := runSPRT(nil, sprt, parked(uint64(i), 0, 100, 3, 5)...)
		if st.GetPhase() == inside {
			sprtIn++
		}
		if len(trs) > 1 {
			t.Errorf("device %d inside at 3 m: %d triggers %v, want at most one ENTER", i, len(trs), trs)
		}
		if st, _ := runSPRT(nil, strict, parked(uint64(i), 0, 100, 3, 5)...); st.GetPhase() == inside {
			strictIn++
		}
		// Outside at 3 m.
		if _, trs := runSPRT(nil, sprt, parked(uint64(i)+1000, 0, 100, -3, 5)...); len(trs) > 0 {
			falseEnter++
		}
	}
	t.Logf("inside at 3 m: sprt entered %d/%d, strict %d/%d; outside at 3 m: sprt false ENTERs %d", sprtIn, devices, strictIn, devices, falseEnter)
	if sprtIn < devices*95/100 {
		t.Errorf("sprt entered %d of %d devices parked 3 m inside, want >= 95%%", sprtIn, devices)
	}
	if sprtIn <= strictIn {
		t.Errorf("sprt entered %d, strict %d: sprt must enter more", sprtIn, strictIn)
	}
	if falseEnter > devices/100 {
		t.Errorf("sprt entered %d of %d devices parked 3 m outside, want <= 1%%", falseEnter, devices)
	}
}

// One wild fix cannot confirm alone, even with MinSamples 1 and no dwell.
func TestSPRTOneWildFixCannotConfirm(t *testing.T) {
	cfg := DefaultSettings()
	cfg.MinSamples, cfg.MinDwell = 1, 0
	st, trs := runSPRT(nil, cfg, Sample{TimeMs: 1, Distance: 5000, AccuracyM: 5})
	if len(trs) != 0 || st.GetPhase() != entering {
		t.Fatalf("a single fix 5 km inside: state %v, triggers %v; want ENTERING and nothing fired", stateString(st), trs)
	}
	// and it is undone by a few fixes on the other side.
	st, _ = runSPRT(st, cfg, parked(1, 2, 4, -20, 5)...)
	if st != nil {
		t.Fatalf("after the wild fix and 4 fixes 20 m outside: %v, want settled outside", stateString(st))
	}
	// A second strong fix confirms (MinSamples 1, no dwell).
	st, trs = runSPRT(nil, cfg, Sample{TimeMs: 1, Distance: 5000, AccuracyM: 5}, Sample{TimeMs: 2, Distance: 5000, AccuracyM: 5})
	if len(trs) != 1 || trs[0] != typEnter {
		t.Fatalf("two fixes deep inside: %v %v, want ENTER", stateString(st), trs)
	}
}

// A long stay does not bank evidence against leaving: the exit after an hour
// inside comes exactly as fast as after a minute.
func TestSPRTBoundedEvidence(t *testing.T) {
	cfg := DefaultSettings()
	stay := func(seconds int) int64 {
		var ss []Sample
		for i := range seconds {
			ss = append(ss, Sample{TimeMs: int64(i) * 1000, Distance: 80, AccuracyM: 5})
		}
		st, trs := runSPRT(nil, cfg, ss...)
		if len(trs) == 0 || trs[0] != typEnter || st.GetPhase() != inside {
			t.Fatalf("stay of %d s: %v %v", seconds, stateString(st), trs)
		}
		for i := seconds; i < seconds+600; i++ {
			var trs []Transition
			st, trs = Step(st, Sample{TimeMs: int64(i) * 1000, Distance: -60, AccuracyM: 5}, cfg)
			if len(trs) > 0 && trs[0].Type == typExit {
				return int64(i - seconds)
			}
		}
		t.Fatalf("no exit within 600 s after a stay of %d s", seconds)
		return 0
	}
	short, long := stay(60), stay(3600)
	if short != long {
		t.Fatalf("exit took %d s after a minute inside, %d s after an hour", short, long)
	}
	if short > 11 {
		t.Fatalf("exit took %d s, want MinDwell (10 s) + 1", short)
	}
	// Waiting for MinDwell does not bank evidence above the threshold either:
	// a candidate full of evidence is undone by as many fixes as a fresh one.
	span, _ := SPRTThreshold(cfg)
	var deep []Sample // censored at 2σ, each adds 2: six saturate the span
	for i := range 6 {
		deep = append(deep, Sample{TimeMs: int64(i) * 1000, Distance: 80, AccuracyM: 5})
	}
	st, _ := runSPRT(nil, cfg, deep...)
	if st.GetPhase() != entering || st.Evidence != span {
		t.Fatalf("candidate waiting for MinDwell: %v evidence %v, want ENTERING at the threshold %v", stateString(st), st.GetEvidence(), span)
	}
}

// Exit evidence is measured against the edge moved outward by Hysteresis.
func TestSPRTExitHysteresis(t *testing.T) {
	cfg := DefaultSettings() // 25 m
	in := &geofencepb.FenceState{Phase: inside, InsideSinceMs: 0, DwellFired: true}
	var ss []Sample
	for i := range 600 {
		ss = append(ss, Sample{TimeMs: int64(i+1) * 1000, Distance: -22, AccuracyM: 5}) // 3 m short of the line
	}
	st, trs := runSPRT(in, cfg, ss...)
	if len(trs) != 0 || st != in {
		t.Fatalf("10 min at 22 m outside (hysteresis 25 m, no noise): %v %v, want INSIDE unchanged", stateString(st), trs)
	}
	st, trs = runSPRT(in, cfg, parked(3, 1000, 60, -31, 5)...) // 6 m beyond the line
	if len(trs) != 1 || trs[0] != typExit || st != nil {
		t.Fatalf("a minute at 31 m outside: %v %v, want EXIT", stateString(st), trs)
	}
}

// Phases, DWELL and the stale-sample rule are those of the strict rule.
func TestSPRTPhasesAndDwell(t *testing.T) {
	cfg := DefaultSettings()
	cfg.Loiter = time.Minute
	s := func(sec int, d float64) Sample { return Sample{TimeMs: int64(sec) * 1000, Distance: d, AccuracyM: 5} }
	st, trs := Step(nil, s(0, -3), cfg)
	if st != nil || trs != nil {
		t.Fatalf("a fix leaning outside from settled OUTSIDE: %v %v", stateString(st), trs)
	}
	st, _ = Step(nil, s(0, 2), cfg)
	if st.GetPhase() != entering || st.CandidateSinceMs != 0 || st.CandidateSamples != 1 || !(st.Evidence > 0) {
		t.Fatalf("a fix leaning inside starts ENTERING: %v evidence %v", stateString(st), st.GetEvidence())
	}
	if next, trs := Step(st, s(-5, 80), cfg); next != st || trs != nil {
		t.Fatalf("a sample older than the candidate changed the state: %v", stateString(next))
	}
	if next, _ := Step(st, s(1, -2), cfg); next != nil {
		t.Fatalf("evidence back at the floor abandons the candidate: %v", stateString(next))
	}
	var got []geofencepb.TriggerType
	for i := 1; i <= 200; i++ {
		var trs []Transition
		st, trs = Step(st, s(i, 40), cfg)
		for _, tr := range trs {
			got = append(got, tr.Type)
			if tr.Type == typEnter && i != 10 {
				t.Errorf("ENTER at %d s, want at 10 s (MinDwell after the first fix)", i)
			}
			if tr.Type == typDwell && i != 70 {
				t.Errorf("DWELL at %d s, want 70 s (loiter after ENTER)", i)
			}
		}
	}
	if len(got) != 2 || got[0] != typEnter || got[1] != typDwell {
		t.Fatalf("triggers %v, want ENTER, DWELL", got)
	}
	// EXITING that falls back keeps the stay: no second DWELL.
	st, _ = Step(st, s(201, -60), cfg)
	if st.GetPhase() != exiting || !st.DwellFired || st.InsideSinceMs != 10_000 {
		t.Fatalf("a fix beyond the hysteresis starts EXITING of the stay: %v", stateString(st))
	}
	st, back := runSPRT(st, cfg, s(202, 30), s(203, 30))
	if st.GetPhase() != inside || !st.DwellFired || st.InsideSinceMs != 10_000 || len(back) != 0 {
		t.Fatalf("back inside: %v %v, want INSIDE of the same stay", stateString(st), back)
	}
	// A silent device: the same Timeout.
	if _, tr, ok := Timeout(st, 203_000, 203_000+cfg.SilenceTimeout.Milliseconds(), cfg); !ok || tr.Reason != timeout {
		t.Fatalf("Timeout under sprt: %v %v", tr, ok)
	}
}

func TestSPRTRobustness(t *testing.T) {
	cfg := DefaultSettings()
	nan := math.NaN()
	st := &geofencepb.FenceState{Phase: entering, CandidateSinceMs: 5, CandidateSamples: 1, Evidence: 2}
	for _, s := range []Sample{{TimeMs: 6, Distance: nan}, {TimeMs: 6, Distance: 3, AccuracyM: nan}} {
		if next, trs := Step(st, s, cfg); next != st || trs != nil {
			t.Errorf("%+v changed the state", s)
		}
	}
	// Exact and negative accuracies are floored at a metre, not infinite.
	for _, acc := range []float64{0, -3} {
		next, _ := Step(nil, Sample{TimeMs: 1, Distance: 0.5, AccuracyM: acc}, cfg)
		if next.GetPhase() != entering || math.IsInf(next.Evidence, 0) {
			t.Errorf("accuracy %v: %v evidence %v", acc, stateString(next), next.GetEvidence())
		}
	}
	// Unvalidated parameters fall back to the defaults rather than NaN.
	bad := cfg
	bad.FalseAlarm, bad.MissedDetection, bad.ResolutionM, bad.MinSamples = -1, 2, math.Inf(1), 0
	if s, c := SPRTThreshold(bad); math.IsNaN(s) || math.IsNaN(c) || c >= s {
		t.Errorf("unvalidated settings: span %v clamp %v", s, c)
	}
	// Random input never panics and keeps the evidence within its bounds.
	span, _ := SPRTThreshold(cfg)
	rng := rand.New(rand.NewPCG(9, 9))
	var cur *geofencepb.FenceState
	for i := range 20_000 {
		s := Sample{TimeMs: int64(i) * 700, Distance: (rng.Float64() - 0.5) * 120, AccuracyM: rng.Float64() * 30}
		cur, _ = Step(cur, s, cfg)
		if e := cur.GetEvidence(); e < 0 || e > span {
			t.Fatalf("evidence %v outside [0, %v]", e, span)
		}
	}
}

func TestResolvedDetector(t *testing.T) {
	d := DefaultSettings()
	if got := Resolved(d, &fences.Fence{}); got.Detector != DetectorSPRT {
		t.Fatalf("no override: %v", got.Detector)
	}
	if got := Resolved(d, &fences.Fence{Settings: fences.Settings{Detector: "strict"}}); got.Detector != DetectorStrict {
		t.Fatalf("override: %v", got.Detector)
	}
}

// BenchmarkStepSPRTEdge is a device parked at the edge, whose evidence
// changes on nearly every fix (BenchmarkStep covers the steady states).
func BenchmarkStepSPRTEdge(b *testing.B) {
	cfg := DefaultSettings()
	var st *geofencepb.FenceState
	ss := parked(1, 0, 1024, -1, 5)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := ss[i%len(ss)]
		s.TimeMs = int64(i) * 1000
		st, _ = Step(st, s, cfg)
	}
}

// Issue 20: a device parked 2 m outside whose every 8th fix is a multipath
// outlier 60 m inside (reporting the normal accuracy) is never entered;
// before censoring, each outlier weighed the per-fix clamp and they added up.
func TestSPRTOutliersAreCensored(t *testing.T) {
	var ss []Sample
	for i := range 300 {
		d := -2.0
		if i%8 == 7 {
			d = 60
		}
		ss = append(ss, Sample{TimeMs: int64(i) * 1000, Distance: d, AccuracyM: 5})
	}
	if _, trs := runSPRT(nil, DefaultSettings(), ss...); len(trs) != 0 {
		t.Fatalf("outliers confirmed a stay: %v", trs)
	}
	before := DefaultSettings()
	before.FalseAlarm, before.MissedDetection, before.ClipSigmas, before.AccuracyFloorM = 0.001, 0.001, 0, 0
	if _, trs := runSPRT(nil, before, ss...); len(trs) == 0 {
		t.Fatal("without censoring the outliers confirm no stay either: the test shows nothing")
	}
}

// Accuracy is not believed below the floor, and AccuracyScale corrects it.
func TestSPRTAccuracyFloorAndScale(t *testing.T) {
	cfg := DefaultSettings()
	ev := func(cfg Settings, acc float64) float64 {
		st, _ := Step(nil, Sample{TimeMs: 1, Distance: 3, AccuracyM: acc}, cfg)
		return st.GetEvidence()
	}
	if a, b := ev(cfg, 0.5), ev(cfg, 5); a != b || !(a > 0) {
		t.Fatalf("evidence at accuracy 0.5 m %v, at 5 m %v: want equal (floor 5 m)", a, b)
	}
	scaled := cfg
	scaled.AccuracyScale = 2
	if a, b := ev(scaled, 5), ev(cfg, 10); math.Abs(a-b) > 1e-12 {
		t.Fatalf("scale 2 at accuracy 5 m: %v, want the evidence of 10 m %v", a, b)
	}
	none := cfg
	none.AccuracyFloorM = 0 // the old rule: σ ≥ 1 m
	if a, b := ev(none, 0.5), ev(none, 1); a != b || a <= ev(cfg, 5) {
		t.Fatalf("without a floor: %v at 0.5 m, %v at 1 m", a, b)
	}
	// Whatever the accuracy, one fix stays below the threshold.
	span, perFix := SPRTThreshold(cfg)
	for _, acc := range []float64{0, 1e-300, 1, 5, 1e9, math.Inf(1)} {
		if e := ev(cfg, acc); e > perFix || e >= span {
			t.Fatalf("accuracy %v: one fix gives %v (clamp %v, span %v)", acc, e, perFix, span)
		}
	}
}

// MinSamples clear fixes in a row (beyond the censoring point) confirm, so
// censoring does not slow a real crossing; one fix that is not clear breaks
// the run.
func TestSPRTClearRunConfirms(t *testing.T) {
	cfg := DefaultSettings()
	cfg.MinDwell = 0
	deep := func(ms int64) Sample { return Sample{TimeMs: ms, Distance: 80, AccuracyM: 5} }
	if _, trs := runSPRT(nil, cfg, deep(0), deep(1000), deep(2000)); len(trs) != 1 || trs[0] != typEnter {
		t.Fatalf("three fixes 80 m inside: %v, want ENTER on the third", trs)
	}
	st, trs := runSPRT(nil, cfg, deep(0), deep(1000), Sample{TimeMs: 2000, Distance: 4, AccuracyM: 5}, deep(3000))
	if len(trs) != 0 || st.GetClearRun() != 1 {
		t.Fatalf("clear, clear, weak, clear: %v %v run %d, want no ENTER yet and a run of 1", stateString(st), trs, st.GetClearRun())
	}
	// The run is saturated, not unbounded, and absent once settled.
	cfg.MinDwell = time.Minute
	st, _ = runSPRT(nil, cfg, deep(0), deep(1000), deep(2000), deep(3000), deep(4000))
	if st.GetClearRun() != 3 {
		t.Fatalf("run %d, want saturated at MinSamples 3", st.GetClearRun())
	}
	st, _ = runSPRT(st, cfg, deep(60_000))
	if st.GetPhase() != inside || st.GetClearRun() != 0 {
		t.Fatalf("after ENTER: %v run %d", stateString(st), st.GetClearRun())
	}
}
