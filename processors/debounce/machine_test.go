package debounce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"google.golang.org/protobuf/proto"
)

const (
	outside  = geofencepb.Phase_PHASE_OUTSIDE
	entering = geofencepb.Phase_PHASE_ENTERING
	inside   = geofencepb.Phase_PHASE_INSIDE
	exiting  = geofencepb.Phase_PHASE_EXITING

	typEnter = geofencepb.TriggerType_TRIGGER_TYPE_ENTER
	typExit  = geofencepb.TriggerType_TRIGGER_TYPE_EXIT
	typDwell = geofencepb.TriggerType_TRIGGER_TYPE_DWELL

	confirmed = geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED
	timeout   = geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT
)

// fs builds a FenceState; phase OUTSIDE with no other field is returned as
// nil because that is how Step reports a settled OUTSIDE.
func fs(phase geofencepb.Phase, since int64, n uint32, insideSince int64, dwelled bool) *geofencepb.FenceState {
	if phase == outside && since == 0 && n == 0 && insideSince == 0 && !dwelled {
		return nil
	}
	return &geofencepb.FenceState{
		Phase: phase, CandidateSinceMs: since, CandidateSamples: n,
		InsideSinceMs: insideSince, DwellFired: dwelled,
	}
}

func in(t int64) Sample     { return Sample{TimeMs: t, Distance: 50} }  // inside evidence
func out(t int64) Sample    { return Sample{TimeMs: t, Distance: -50} } // outside evidence
func band(t int64) Sample   { return Sample{TimeMs: t, Distance: -10} } // ambiguous, centre outside
func strIn(t int64) Sample  { return Sample{TimeMs: t, Distance: 5, AccuracyM: 20} }
func strOut(t int64) Sample { return Sample{TimeMs: t, Distance: -30, AccuracyM: 40} }

func stateString(st *geofencepb.FenceState) string {
	if st == nil {
		return "nil"
	}
	return fmt.Sprintf("{%v since=%d n=%d in=%d dwell=%v}", st.Phase, st.CandidateSinceMs,
		st.CandidateSamples, st.InsideSinceMs, st.DwellFired)
}

func sameState(a, b *geofencepb.FenceState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return proto.Equal(a, b)
}

func trString(trs []Transition) string {
	var b strings.Builder
	for i, tr := range trs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strings.TrimPrefix(tr.Type.String(), "TRIGGER_TYPE_"))
		b.WriteByte('/')
		b.WriteString(strings.TrimPrefix(tr.Reason.String(), "TRIGGER_REASON_"))
	}
	return b.String()
}

func TestClassify(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name   string
		d, acc float64
		h      float64
		want   evidence
	}{
		{"deep inside", 50, 0, 25, evInside},
		{"on the edge, exact", 0, 0, 25, evInside},
		{"on the edge, exact, no hysteresis", 0, 0, 0, evInside},
		{"circle touches edge from inside", 5, 5, 25, evInside},
		{"circle straddles, centre inside", 5, 5.01, 25, evLeanInside},
		{"centre on edge, with accuracy", 0, 1, 25, evLeanInside},
		{"just outside, in band", -0.01, 0, 25, evLeanOutside},
		{"band edge exactly", -25, 0, 25, evOutside},
		{"just inside band", -24.99, 0, 25, evLeanOutside},
		{"beyond band, circle straddles", -30, 40, 25, evLeanOutside},
		{"beyond band, circle touches edge", -40, 40, 25, evOutside},
		{"no hysteresis, just outside", -0.01, 0, 0, evOutside},
		{"negative accuracy counts as 0", 1, -5, 25, evInside},
		{"NaN hysteresis counts as 0", -1, 0, nan, evOutside},
		{"negative hysteresis counts as 0", -1, 0, -5, evOutside},
		{"+Inf inside", math.Inf(1), 10, 25, evInside},
		{"-Inf outside", math.Inf(-1), 10, 25, evOutside},
		{"infinite accuracy, centre inside", 10, math.Inf(1), 25, evLeanInside},
		{"infinite accuracy, centre outside", -10, math.Inf(1), 25, evLeanOutside},
		{"NaN distance", nan, 0, 25, evNoInformation},
		{"NaN accuracy", 10, nan, 25, evNoInformation},
	}
	for _, tt := range tests {
		if got := classify(Sample{Distance: tt.d, AccuracyM: tt.acc}, tt.h); got != tt.want {
			t.Errorf("%s: classify(d=%v, acc=%v, h=%v) = %v, want %v", tt.name, tt.d, tt.acc, tt.h, got, tt.want)
		}
	}
}

// TestStepSingle checks every (phase, kind of sample) pair once.
func TestStepSingle(t *testing.T) {
	cfg := strictDefaults() // 3 samples, 10 s, 25 m, loiter 5 min
	const T = 1_000_000
	loiter := cfg.Loiter.Milliseconds()
	tests := []struct {
		name string
		st   *geofencepb.FenceState
		s    Sample
		want *geofencepb.FenceState
		tr   string
	}{
		// OUTSIDE
		{"outside+in starts entering", nil, in(T), fs(entering, T, 1, 0, false), ""},
		{"outside+out stays", nil, out(T), nil, ""},
		{"outside+band stays", nil, band(T), nil, ""},
		{"outside+straddle(centre in) stays", nil, strIn(T), nil, ""},
		{"outside+straddle(centre out) stays", nil, strOut(T), nil, ""},
		{"explicit OUTSIDE normalised to nil", &geofencepb.FenceState{}, out(T), nil, ""},
		{"explicit OUTSIDE+in", &geofencepb.FenceState{}, in(T), fs(entering, T, 1, 0, false), ""},
		{"unknown phase is OUTSIDE", &geofencepb.FenceState{Phase: 42}, in(T), fs(entering, T, 1, 0, false), ""},
		{"unknown phase+out dropped", &geofencepb.FenceState{Phase: 42}, out(T), nil, ""},

		// ENTERING
		{"entering+in counts", fs(entering, T, 1, 0, false), in(T + 5000), fs(entering, T, 2, 0, false), ""},
		{"entering+in confirms", fs(entering, T, 2, 0, false), in(T + 10_000), fs(inside, 0, 0, T+10_000, false), "ENTER/CONFIRMED"},
		{"entering+in enough samples, too soon", fs(entering, T, 2, 0, false), in(T + 9_999), fs(entering, T, 3, 0, false), ""},
		{"entering saturated, still too soon: no change", fs(entering, T, 3, 0, false), in(T + 9_999), fs(entering, T, 3, 0, false), ""},
		{"entering long enough, too few samples", fs(entering, T, 1, 0, false), in(T + 60_000), fs(entering, T, 2, 0, false), ""},
		{"entering+out abandons", fs(entering, T, 2, 0, false), out(T + 1000), nil, ""},
		{"entering+band abandons", fs(entering, T, 2, 0, false), band(T + 1000), nil, ""},
		{"entering+straddle(centre out) abandons", fs(entering, T, 2, 0, false), strOut(T + 1000), nil, ""},
		{"entering+straddle(centre in) kept, not counted", fs(entering, T, 2, 0, false), strIn(T + 20_000), fs(entering, T, 2, 0, false), ""},
		{"entering+stale in ignored", fs(entering, T, 2, 0, false), in(T - 1), fs(entering, T, 2, 0, false), ""},
		{"entering+stale out ignored", fs(entering, T, 2, 0, false), out(T - 1), fs(entering, T, 2, 0, false), ""},
		{"entering+NaN ignored", fs(entering, T, 2, 0, false), Sample{TimeMs: T + 1, Distance: math.NaN()}, fs(entering, T, 2, 0, false), ""},

		// INSIDE
		{"inside+in stays", fs(inside, 0, 0, T, false), in(T + 1000), fs(inside, 0, 0, T, false), ""},
		{"inside+band stays", fs(inside, 0, 0, T, false), band(T + 1000), fs(inside, 0, 0, T, false), ""},
		{"inside+straddle stays", fs(inside, 0, 0, T, false), strOut(T + 1000), fs(inside, 0, 0, T, false), ""},
		{"inside+out starts exiting", fs(inside, 0, 0, T, true), out(T + 1000), fs(exiting, T+1000, 1, T, true), ""},
		{"inside+in at loiter fires dwell", fs(inside, 0, 0, T, false), in(T + loiter), fs(inside, 0, 0, T, true), "DWELL/CONFIRMED"},
		{"inside+in 1ms before loiter", fs(inside, 0, 0, T, false), in(T + loiter - 1), fs(inside, 0, 0, T, false), ""},
		{"inside+band at loiter fires dwell", fs(inside, 0, 0, T, false), band(T + loiter), fs(inside, 0, 0, T, true), "DWELL/CONFIRMED"},
		{"inside dwell already fired", fs(inside, 0, 0, T, true), in(T + 10*loiter), fs(inside, 0, 0, T, true), ""},
		{"inside+out at loiter: exiting, no dwell", fs(inside, 0, 0, T, false), out(T + loiter), fs(exiting, T+loiter, 1, T, false), ""},
		{"inside+stale out ignored", fs(inside, 0, 0, T, false), out(T - 1), fs(inside, 0, 0, T, false), ""},

		// EXITING
		{"exiting+out counts", fs(exiting, T, 1, T-100, false), out(T + 5000), fs(exiting, T, 2, T-100, false), ""},
		{"exiting+out confirms", fs(exiting, T, 2, T-100, false), out(T + 10_000), nil, "EXIT/CONFIRMED"},
		{"exiting+out enough samples, too soon", fs(exiting, T, 2, T-100, false), out(T + 9_999), fs(exiting, T, 3, T-100, false), ""},
		{"exiting+in back inside, stay kept", fs(exiting, T, 2, T-100, true), in(T + 1000), fs(inside, 0, 0, T-100, true), ""},
		{"exiting+straddle(centre in) back inside", fs(exiting, T, 2, T-100, false), strIn(T + 1000), fs(inside, 0, 0, T-100, false), ""},
		{"exiting+band kept, not counted", fs(exiting, T, 2, T-100, false), band(T + 60_000), fs(exiting, T, 2, T-100, false), ""},
		{"exiting+straddle(centre out) kept", fs(exiting, T, 2, T-100, false), strOut(T + 60_000), fs(exiting, T, 2, T-100, false), ""},
		{"exiting never dwells", fs(exiting, T, 1, T-loiter, false), band(T + loiter), fs(exiting, T, 1, T-loiter, false), ""},
		{"exiting+in after loiter: inside and dwell", fs(exiting, T, 2, T-loiter, false), in(T + 1), fs(inside, 0, 0, T-loiter, true), "DWELL/CONFIRMED"},
		{"exiting+stale in ignored", fs(exiting, T, 2, T-100, false), in(T - 1), fs(exiting, T, 2, T-100, false), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *geofencepb.FenceState
			if tt.st != nil {
				before = proto.Clone(tt.st).(*geofencepb.FenceState)
			}
			got, trs := Step(tt.st, tt.s, cfg)
			if !sameState(got, tt.want) {
				t.Errorf("state = %s, want %s", stateString(got), stateString(tt.want))
			}
			if trString(trs) != tt.tr {
				t.Errorf("transitions = %q, want %q", trString(trs), tt.tr)
			}
			if !sameState(tt.st, before) {
				t.Errorf("Step modified its input: %s, was %s", stateString(tt.st), stateString(before))
			}
			if sameState(got, tt.st) && got != tt.st {
				t.Errorf("unchanged state was reallocated; want the input pointer back")
			}
		})
	}
}

// fields is a comparable copy of a FenceState (nil: all zero, ok false).
type fields struct {
	ok          bool
	phase       geofencepb.Phase
	since       int64
	n           uint32
	insideSince int64
	dwell       bool
}

func snapshot(st *geofencepb.FenceState) fields {
	if st == nil {
		return fields{}
	}
	return fields{true, st.Phase, st.CandidateSinceMs, st.CandidateSamples, st.InsideSinceMs, st.DwellFired}
}

type event struct {
	i  int
	tr Transition
}

// run feeds samples through Step and returns the final state and every
// transition with the index of the sample that fired it.
func run(st *geofencepb.FenceState, cfg Settings, samples ...Sample) (*geofencepb.FenceState, []event) {
	var evs []event
	for i, s := range samples {
		var trs []Transition
		st, trs = Step(st, s, cfg)
		for _, tr := range trs {
			evs = append(evs, event{i, tr})
		}
	}
	return st, evs
}

func evString(evs []event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("%d:%s", e.i, trString([]Transition{e.tr}))
	}
	return strings.Join(parts, " ")
}

func TestStepSequences(t *testing.T) {
	def := strictDefaults()
	raw := Settings{MinSamples: 1, Hysteresis: 25, Loiter: time.Minute, SilenceTimeout: time.Minute}
	s := func(v ...Sample) []Sample { return v }
	tests := []struct {
		name    string
		cfg     Settings
		samples []Sample
		want    string
		final   geofencepb.Phase
	}{
		{"enter after 3 samples over 10s", def, s(in(0), in(5000), in(10_000)), "2:ENTER/CONFIRMED", inside},
		{"3 samples in 8s, 4th at 10s", def, s(in(0), in(4000), in(8000), in(10_000)), "3:ENTER/CONFIRMED", inside},
		{"interrupted by outside, restarts", def,
			s(in(0), in(5000), out(6000), in(7000), in(12_000), in(17_000)), "5:ENTER/CONFIRMED", inside},
		{"interrupted by band, restarts", def,
			s(in(0), in(5000), band(6000), in(7000), in(12_000), in(17_000)), "5:ENTER/CONFIRMED", inside},
		{"coarse fixes inside do not break the run", def,
			s(in(0), strIn(3000), in(5000), strIn(7000), in(10_000)), "4:ENTER/CONFIRMED", inside},
		{"full cycle", def,
			s(in(0), in(5000), in(10_000), out(20_000), out(25_000), out(30_000)),
			"2:ENTER/CONFIRMED 5:EXIT/CONFIRMED", outside},
		{"exit cancelled by an inside fix", def,
			s(in(0), in(5000), in(10_000), out(20_000), out(25_000), in(26_000), out(27_000), out(32_000)),
			"2:ENTER/CONFIRMED", exiting},
		{"exit through the band", def,
			s(in(0), in(5000), in(10_000), band(15_000), out(20_000), band(22_000), out(25_000), out(30_000)),
			"2:ENTER/CONFIRMED 7:EXIT/CONFIRMED", outside},
		{"dwell once, then exit, re-enter, dwell again", def,
			s(in(0), in(5000), in(10_000), in(200_000), in(310_000), in(400_000), in(900_000),
				out(1_000_000), out(1_005_000), out(1_010_000),
				in(2_000_000), in(2_005_000), in(2_010_000), in(2_310_000), in(2_320_000)),
			"2:ENTER/CONFIRMED 4:DWELL/CONFIRMED 9:EXIT/CONFIRMED 12:ENTER/CONFIRMED 13:DWELL/CONFIRMED", inside},
		{"raw detector enters and exits at once", raw,
			s(band(0), in(1), in(2), band(3), out(4), band(5), in(6)),
			"1:ENTER/CONFIRMED 4:EXIT/CONFIRMED 6:ENTER/CONFIRMED", inside},
		{"raw detector still ignores the band", raw,
			s(in(0), band(1), band(2), band(3), in(4), band(5)), "0:ENTER/CONFIRMED", inside},
		{"raw detector: dwell on a later sample only", Settings{MinSamples: 1, SilenceTimeout: time.Minute},
			s(in(7), in(7), in(8)), "0:ENTER/CONFIRMED 1:DWELL/CONFIRMED", inside},
		{"duplicate timestamps cannot beat MinDwell", def,
			s(in(0), in(0), in(0), in(0), in(9999)), "", entering},
		{"out of order sample does not shorten the dwell", def,
			s(in(10_000), in(12_000), in(-50_000), in(15_000), in(20_000)), "4:ENTER/CONFIRMED", inside},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, evs := run(nil, tt.cfg, tt.samples...)
			if got := evString(evs); got != tt.want {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
			if st.GetPhase() != tt.final {
				t.Errorf("final state %s, want phase %v", stateString(st), tt.final)
			}
		})
	}
}

func TestStepDwellBoundary(t *testing.T) {
	cfg := strictDefaults()
	cfg.Loiter = 90 * time.Second
	st, evs := run(nil, cfg, in(1000), in(6000), in(11_000)) // ENTER at 11000
	if evString(evs) != "2:ENTER/CONFIRMED" || st.InsideSinceMs != 11_000 {
		t.Fatalf("setup: %s %s", evString(evs), stateString(st))
	}
	st, evs = run(st, cfg, in(11_000+89_999))
	if len(evs) != 0 {
		t.Fatalf("DWELL 1 ms early: %s", evString(evs))
	}
	st, evs = run(st, cfg, band(11_000+90_000))
	if evString(evs) != "0:DWELL/CONFIRMED" {
		t.Fatalf("no DWELL exactly at the boundary: %q", evString(evs))
	}
	_, evs = run(st, cfg, in(200_000), in(300_000), band(400_000), strOut(500_000), in(1_000_000_000))
	if len(evs) != 0 {
		t.Fatalf("DWELL fired twice in one stay: %s", evString(evs))
	}

	// Sub-millisecond loiter rounds up rather than firing early.
	cfg.Loiter = 1500 * time.Microsecond
	st = fs(inside, 0, 0, 0, false)
	if _, trs := Step(st, in(1), cfg); trs != nil {
		t.Fatalf("1.5 ms loiter fired after 1 ms")
	}
	if _, trs := Step(st, in(2), cfg); trString(trs) != "DWELL/CONFIRMED" {
		t.Fatalf("1.5 ms loiter did not fire after 2 ms")
	}
}

// TestStepHovering: thousands of ambiguous samples never move a state across
// the edge, whatever state they find.
func TestStepHovering(t *testing.T) {
	cfg := strictDefaults()
	r := rand.New(rand.NewPCG(1, 2))
	ambiguous := func(t int64) Sample {
		switch r.IntN(3) {
		case 0: // in the hysteresis band
			return Sample{TimeMs: t, Distance: -r.Float64() * 24.99}
		case 1: // straddling, centre inside
			d := r.Float64() * 30
			return Sample{TimeMs: t, Distance: d, AccuracyM: d + 0.01 + r.Float64()*50}
		default: // straddling, centre beyond the band
			d := -25 - r.Float64()*30
			return Sample{TimeMs: t, Distance: d, AccuracyM: -d + 0.01 + r.Float64()*50}
		}
	}
	for _, start := range []*geofencepb.FenceState{
		nil,
		fs(inside, 0, 0, 0, false),
		fs(inside, 0, 0, 0, true),
		fs(exiting, 0, 2, -1000, true),
	} {
		st := start
		for i := range 10_000 {
			s := ambiguous(int64(i+1) * 1000)
			next, trs := Step(st, s, cfg)
			for _, tr := range trs {
				if tr.Type != typDwell {
					t.Fatalf("from %s: sample %d %+v fired %s", stateString(start), i, s, trString(trs))
				}
			}
			st = next
		}
		if start.GetPhase() == outside && st != nil {
			t.Errorf("from OUTSIDE: ended %s", stateString(st))
		}
		if start.GetPhase() != outside && (st.GetPhase() != inside && st.GetPhase() != exiting) {
			t.Errorf("from %s: ended %s", stateString(start), stateString(st))
		}
	}
	// The band on its own keeps an INSIDE or EXITING state exactly as it is.
	for _, start := range []*geofencepb.FenceState{fs(inside, 0, 0, 0, true), fs(exiting, 0, 2, -1000, true)} {
		st := start
		for i := range 5000 {
			st, _ = Step(st, Sample{TimeMs: int64(i), Distance: -12, AccuracyM: 3}, cfg)
		}
		if st != start {
			t.Errorf("band hovering changed %s into %s", stateString(start), stateString(st))
		}
	}
}

// TestStepJitterNearEdge is the quality requirement in miniature: a device
// parked a few metres from the edge with honest GPS jitter fires nothing,
// while a raw point-in-polygon detector fires on every crossing.
func TestStepJitterNearEdge(t *testing.T) {
	const sigma = 5.0       // per-axis error, metres
	const acc = 1.5 * sigma // reported 68% radius
	raw := Settings{MinSamples: 1, SilenceTimeout: time.Hour}
	tests := []struct {
		truth       float64 // true signed distance of the parked device
		startInside bool    // the state it is parked in
	}{
		// Truly outside, settled outside: no ENTER from stray inside fixes.
		{-20, false}, {-8, false}, {-3, false}, {-1, false},
		// Settled inside: no EXIT, whether the device is truly inside or
		// parked inside the hysteresis band just beyond the edge.
		{-8, true}, {-3, true}, {-1, true}, {0, true}, {3, true}, {8, true}, {20, true},
	}
	for _, tt := range tests {
		r := rand.New(rand.NewPCG(uint64(tt.truth+100), 7))
		var st, rawSt *geofencepb.FenceState
		if tt.startInside {
			st = fs(inside, 0, 0, 0, true) // DWELL already fired
			rawSt = st
		}
		var fired, rawFired int
		for i := range 20_000 { // 1 Hz for 5.5 hours
			s := Sample{TimeMs: int64(i) * 1000, Distance: tt.truth + r.NormFloat64()*sigma, AccuracyM: acc}
			var trs []Transition
			st, trs = Step(st, s, strictDefaults())
			fired += len(trs)
			rawSt, trs = Step(rawSt, Sample{TimeMs: s.TimeMs, Distance: s.Distance}, raw)
			rawFired += len(trs)
		}
		if fired != 0 {
			t.Errorf("parked at %+.0f m (settled inside: %v): debounced machine fired %d triggers", tt.truth, tt.startInside, fired)
		}
		if math.Abs(tt.truth) <= 3 && rawFired < 1000 {
			t.Errorf("parked at %+.0f m: raw detector fired only %d (test is not exercising jitter)", tt.truth, rawFired)
		}
		t.Logf("parked at %+3.0f m, settled inside %-5v: debounced %d, raw %d", tt.truth, tt.startInside, fired, rawFired)
	}
}

// TestStepTrueCrossing: a vehicle driving through a fence with the same
// jitter is detected both ways.
func TestStepTrueCrossing(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		var st *geofencepb.FenceState
		var evs []string
		// Drive in at 8 m/s, stay 10 min 200 m deep, drive out.
		for i := range int64(1200) {
			var d float64
			switch {
			case i < 60:
				d = -200 + float64(i)*8 // -200 → +272
			case i < 1100:
				d = 272
			default:
				d = 272 - float64(i-1100)*8 // → -528
			}
			s := Sample{TimeMs: i * 1000, Distance: d + r.NormFloat64()*5, AccuracyM: 7.5}
			var trs []Transition
			st, trs = Step(st, s, strictDefaults())
			for _, tr := range trs {
				evs = append(evs, tr.Type.String())
			}
		}
		want := "TRIGGER_TYPE_ENTER TRIGGER_TYPE_DWELL TRIGGER_TYPE_EXIT"
		if got := strings.Join(evs, " "); got != want {
			t.Fatalf("seed %d: %s, want %s", seed, got, want)
		}
	}
}

func TestStepBadSettingsDoNotPanic(t *testing.T) {
	bad := []Settings{
		{},
		{MinSamples: -5, MinDwell: -time.Hour, Hysteresis: math.NaN(), Loiter: -1},
		{MinSamples: math.MaxInt, MinDwell: math.MaxInt64, Hysteresis: math.Inf(1), Loiter: math.MaxInt64},
	}
	times := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}
	dists := []float64{math.Inf(-1), -1e9, -25, -1, 0, 1, 1e9, math.Inf(1), math.NaN()}
	for _, cfg := range bad {
		for _, start := range []*geofencepb.FenceState{
			nil, fs(entering, math.MinInt64, 1, 0, false), fs(entering, math.MaxInt64, math.MaxUint32, 0, false),
			fs(inside, 0, 0, math.MinInt64, false), fs(exiting, math.MinInt64, 7, math.MaxInt64, true),
		} {
			for _, tm := range times {
				for _, d := range dists {
					Step(start, Sample{TimeMs: tm, Distance: d, AccuracyM: -1}, cfg)
					Timeout(start, tm, -tm, cfg)
				}
			}
		}
	}
	// Zero settings behave as the raw detector with no hysteresis.
	st, evs := run(nil, Settings{}, in(0), Sample{TimeMs: 1, Distance: -0.5})
	if evString(evs) != "0:ENTER/CONFIRMED 1:EXIT/CONFIRMED" || st != nil {
		t.Errorf("zero settings: %s, %s", evString(evs), stateString(st))
	}
}

func TestElapsed(t *testing.T) {
	tests := []struct {
		from, to int64
		d        time.Duration
		want     bool
	}{
		{0, 10_000, 10 * time.Second, true},
		{0, 9_999, 10 * time.Second, false},
		{5, 4, 0, false},
		{5, 5, 0, true},
		{5, 5, -time.Hour, true},
		{math.MinInt64, math.MaxInt64, math.MaxInt64, true}, // span overflows int64
		{math.MaxInt64 - 1, math.MaxInt64, 2 * time.Millisecond, false},
		{-1000, 1000, 2 * time.Second, true},
		{0, 1, time.Microsecond, true},
		{0, 0, time.Microsecond, false},
	}
	for _, tt := range tests {
		if got := elapsed(tt.from, tt.to, tt.d); got != tt.want {
			t.Errorf("elapsed(%d, %d, %v) = %v, want %v", tt.from, tt.to, tt.d, got, tt.want)
		}
	}
}

func TestTimeout(t *testing.T) {
	cfg := strictDefaults() // 10 min
	const T = 1_000_000_000
	limit := cfg.SilenceTimeout.Milliseconds()
	exitTimeout := Transition{typExit, timeout}
	tests := []struct {
		name      string
		st        *geofencepb.FenceState
		last, now int64
		cfg       Settings
		want      *geofencepb.FenceState
		tr        Transition
		ok        bool
	}{
		{"inside, exactly at the limit", fs(inside, 0, 0, T-5, true), T, T + limit, cfg, nil, exitTimeout, true},
		{"inside, 1 ms short", fs(inside, 0, 0, T-5, true), T, T + limit - 1, cfg, fs(inside, 0, 0, T-5, true), Transition{}, false},
		{"exiting, long silent", fs(exiting, T, 2, T-5, false), T, T + 100*limit, cfg, nil, exitTimeout, true},
		{"entering, silent: dropped, nothing fired", fs(entering, T, 2, 0, false), T, T + limit, cfg, nil, Transition{}, false},
		{"entering, not yet silent", fs(entering, T, 2, 0, false), T, T + 1, cfg, fs(entering, T, 2, 0, false), Transition{}, false},
		{"outside (nil)", nil, T, T + 100*limit, cfg, nil, Transition{}, false},
		{"now before last seen", fs(inside, 0, 0, T, false), T, T - limit, cfg, fs(inside, 0, 0, T, false), Transition{}, false},
		{"disabled by zero timeout", fs(inside, 0, 0, T, false), T, T + 100*limit, Settings{}, fs(inside, 0, 0, T, false), Transition{}, false},
		{"extreme times do not overflow", fs(inside, 0, 0, 0, false), math.MinInt64, math.MaxInt64, cfg, nil, exitTimeout, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, tr, ok := Timeout(tt.st, tt.last, tt.now, tt.cfg)
			if !sameState(got, tt.want) || tr != tt.tr || ok != tt.ok {
				t.Errorf("Timeout = %s, %+v, %v; want %s, %+v, %v",
					stateString(got), tr, ok, stateString(tt.want), tt.tr, tt.ok)
			}
			if !ok && tt.want != nil && got != tt.st {
				t.Errorf("unchanged state was reallocated")
			}
		})
	}
}

// TestStepProperty drives random trajectories (with random settings, random
// jitter and accuracy, repeated and out-of-order times, and random timeout
// sweeps) and checks the invariants every consumer relies on:
//
//   - ENTER and EXIT strictly alternate, starting with ENTER;
//   - DWELL only between an ENTER and its EXIT, at most once per stay, and
//     never on the sample that confirmed the ENTER;
//   - no sample classified ambiguous ever fires ENTER or EXIT;
//   - Step never modifies its input, returns its input when nothing changed,
//     and never returns a non-nil settled OUTSIDE;
//   - the phase agrees with the emitted history (INSIDE/EXITING iff inside).
func TestStepProperty(t *testing.T) {
	seeds := 1000
	if testing.Short() {
		seeds = 50
	}
	counts := map[Transition]int{}
	defer func() {
		// Guard against a vacuous pass: every kind of trigger must occur.
		for _, tr := range []Transition{{typEnter, confirmed}, {typExit, confirmed}, {typDwell, confirmed}, {typExit, timeout}} {
			if counts[tr] < seeds/10 {
				t.Errorf("only %d %v/%v over %d trajectories", counts[tr], tr.Type, tr.Reason, seeds)
			}
		}
		t.Logf("triggers over %d trajectories: %v", seeds, counts)
	}()
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		cfg := Settings{
			MinSamples:     1 + r.IntN(5),
			MinDwell:       time.Duration(r.IntN(4)) * 5 * time.Second,
			Hysteresis:     float64(r.IntN(4)) * 10,
			Loiter:         time.Duration(r.IntN(4)) * 30 * time.Second,
			SilenceTimeout: time.Duration(1+r.IntN(3)) * time.Minute,
		}
		var (
			st        *geofencepb.FenceState
			in        bool // an ENTER is open
			dwelled   bool
			now, last int64
			trace     [12]func() string // the last steps, formatted only on failure
			steps     int
		)
		fail := func(format string, args ...any) {
			t.Helper()
			var tail []string
			for i := max(0, steps-len(trace)); i < steps; i++ {
				tail = append(tail, trace[i%len(trace)]())
			}
			t.Fatalf("seed %d, cfg %+v: %s\nlast steps:\n%s", seed, cfg, fmt.Sprintf(format, args...), strings.Join(tail, "\n"))
		}
		apply := func(tr Transition) {
			counts[tr]++
			switch tr.Type {
			case typEnter:
				if in {
					fail("ENTER while already inside")
				}
				in, dwelled = true, false
			case typExit:
				if !in {
					fail("EXIT without ENTER")
				}
				in = false
			case typDwell:
				switch {
				case !in:
					fail("DWELL outside a stay")
				case dwelled:
					fail("second DWELL in one stay")
				}
				dwelled = true
			default:
				fail("transition %+v", tr)
			}
		}
		d := (r.Float64() - 0.5) * 200
		for range 3000 {
			// Mostly forward in time; sometimes a repeat or a step back.
			switch k := r.IntN(20); {
			case k == 0:
				now -= int64(r.IntN(30_000))
			case k == 1:
			default:
				now += int64(r.IntN(6000))
			}
			if now > last {
				last = now
			}
			if r.IntN(200) == 0 { // a sweep some time after the last sample
				sweep := last + int64(r.IntN(4*60_000))
				next, tr, ok := Timeout(st, last, sweep, cfg)
				prev, silent := st, sweep-last
				trace[steps%len(trace)] = func() string {
					return fmt.Sprintf("Timeout(%s, silent %d ms) → %s %+v %v", stateString(prev), silent, stateString(next), tr, ok)
				}
				steps++
				if ok {
					if tr != (Transition{typExit, timeout}) || next != nil {
						fail("Timeout returned %s, %+v", stateString(next), tr)
					}
					apply(tr)
				}
				st = next
				if next == nil {
					last, now = sweep, sweep // the device comes back later
				}
				continue
			}
			// Random walk across the edge with jitter and random accuracy.
			d += r.NormFloat64() * 15
			d = max(-150, min(150, d))
			s := Sample{TimeMs: now, Distance: d + r.NormFloat64()*8, AccuracyM: r.ExpFloat64() * 10}
			if r.IntN(50) == 0 {
				s.Distance = math.NaN()
			}
			before := snapshot(st)
			next, trs := Step(st, s, cfg)
			prev := st
			trace[steps%len(trace)] = func() string {
				return fmt.Sprintf("Step(%s, %+v) → %s %s", stateString(prev), s, stateString(next), trString(trs))
			}
			steps++
			if snapshot(st) != before {
				fail("Step modified its input")
			}
			if snapshot(next) == snapshot(st) && next != st {
				fail("unchanged state reallocated")
			}
			if next != nil && next.Phase == outside {
				fail("non-nil OUTSIDE returned")
			}
			if len(trs) > 1 {
				fail("more than one transition: %s", trString(trs))
			}
			ev := classify(s, cfg.Hysteresis)
			enteredNow := false
			for _, tr := range trs {
				if tr.Reason != confirmed {
					fail("Step fired reason %v", tr.Reason)
				}
				if tr.Type != typDwell && ev != evInside && ev != evOutside {
					fail("ambiguous sample fired %s", trString(trs))
				}
				apply(tr)
				enteredNow = enteredNow || tr.Type == typEnter
				if enteredNow && tr.Type == typDwell {
					fail("DWELL on the confirming sample")
				}
			}
			ph := next.GetPhase()
			if wantIn := ph == inside || ph == exiting; wantIn != in {
				fail("phase %v but ENTER open = %v", ph, in)
			}
			if next != nil && (ph == inside || ph == exiting) && next.DwellFired != dwelled {
				fail("DwellFired %v, but DWELL emitted = %v", next.DwellFired, dwelled)
			}
			st = next
		}
	}
}

func TestStepNoChangeDoesNotAllocate(t *testing.T) {
	cfg := strictDefaults()
	cases := []struct {
		name string
		st   *geofencepb.FenceState
		s    Sample
	}{
		{"sprt: outside, fix leaning outside", nil, Sample{TimeMs: 5, Distance: -2, AccuracyM: 5}},
		{"sprt: inside, fix short of the hysteresis line", fs(inside, 0, 0, 0, true), Sample{TimeMs: 5, Distance: -20, AccuracyM: 5}},
		{"outside+out", nil, out(5)},
		{"outside+band", nil, band(5)},
		{"inside+in", fs(inside, 0, 0, 0, true), in(5)},
		{"inside+band", fs(inside, 0, 0, 0, false), band(5)},
		{"entering saturated", fs(entering, 0, 3, 0, false), in(5)},
		{"exiting+band", fs(exiting, 0, 1, 0, false), band(5)},
	}
	for _, c := range cases {
		cfg := cfg
		if strings.HasPrefix(c.name, "sprt:") {
			cfg = DefaultSettings()
		}
		if n := testing.AllocsPerRun(100, func() { Step(c.st, c.s, cfg) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", c.name, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { Timeout(fs(inside, 0, 0, 0, false), 0, 1, cfg) }); n != 0 {
		t.Errorf("Timeout: %v allocations, want 0", n)
	}
}

func BenchmarkStep(b *testing.B) {
	b.Run("strict", func(b *testing.B) { benchStep(b, strictDefaults()) })
	b.Run("sprt", func(b *testing.B) { benchStep(b, DefaultSettings()) })
}

func benchStep(b *testing.B, cfg Settings) {
	b.Run("inside/steady", func(b *testing.B) {
		st := fs(inside, 0, 0, 0, true)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			st, _ = Step(st, Sample{TimeMs: int64(i), Distance: 40, AccuracyM: 8}, cfg)
		}
	})
	b.Run("outside/steady", func(b *testing.B) {
		var st *geofencepb.FenceState
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			st, _ = Step(st, Sample{TimeMs: int64(i), Distance: -400, AccuracyM: 8}, cfg)
		}
	})
	b.Run("band/hovering", func(b *testing.B) {
		st := fs(inside, 0, 0, 0, true)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			st, _ = Step(st, Sample{TimeMs: int64(i), Distance: -12, AccuracyM: 8}, cfg)
		}
	})
	b.Run("cycle", func(b *testing.B) {
		// ENTER, DWELL, EXIT every 16 samples: the allocating path.
		var st *geofencepb.FenceState
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d := 50.0
			if i%16 >= 8 {
				d = -50
			}
			st, _ = Step(st, Sample{TimeMs: int64(i) * 60_000, Distance: d}, cfg)
		}
	})
}

// strictDefaults are the defaults under the strict rule, which the tests in
// this file pin down (sprt_test.go covers the sprt detector).
func strictDefaults() Settings {
	s := DefaultSettings()
	s.Detector = DetectorStrict
	return s
}
