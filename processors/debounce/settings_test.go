package debounce

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

func TestDefaultSettings(t *testing.T) {
	d := DefaultSettings()
	want := Settings{MinSamples: 3, MinDwell: 10 * time.Second, Hysteresis: 25, Loiter: 5 * time.Minute, SilenceTimeout: 10 * time.Minute,
		Detector: DetectorSPRT, FalseAlarm: 0.006, MissedDetection: 0.006, ResolutionM: 2.5,
		AccuracyFloorM: 5, AccuracyScale: 1, ClipSigmas: 2, MaxSpeedMS: 50}
	if d != want {
		t.Fatalf("DefaultSettings() = %+v, want %+v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestResolve(t *testing.T) {
	d := DefaultSettings()
	// ov is d with the five original fields replaced.
	ov := func(n int, dwell time.Duration, hyst float64, loiter, silence time.Duration) Settings {
		s := d
		s.MinSamples, s.MinDwell, s.Hysteresis, s.Loiter, s.SilenceTimeout = n, dwell, hyst, loiter, silence
		return s
	}
	strict := d
	strict.Detector = DetectorStrict
	tests := []struct {
		name string
		p    *geofencepb.DebounceSettings
		want Settings
	}{
		{"nil is the defaults", nil, d},
		{"all zero is the defaults", &geofencepb.DebounceSettings{}, d},
		{"min samples", &geofencepb.DebounceSettings{MinSamples: 5},
			ov(5, d.MinDwell, d.Hysteresis, d.Loiter, d.SilenceTimeout)},
		{"min dwell", &geofencepb.DebounceSettings{MinDwellMs: 2500},
			ov(d.MinSamples, 2500*time.Millisecond, d.Hysteresis, d.Loiter, d.SilenceTimeout)},
		{"hysteresis", &geofencepb.DebounceSettings{HysteresisM: 7.5},
			ov(d.MinSamples, d.MinDwell, 7.5, d.Loiter, d.SilenceTimeout)},
		{"loiter", &geofencepb.DebounceSettings{LoiterMs: 60_000},
			ov(d.MinSamples, d.MinDwell, d.Hysteresis, time.Minute, d.SilenceTimeout)},
		{"silence timeout", &geofencepb.DebounceSettings{SilenceTimeoutMs: 3_600_000},
			ov(d.MinSamples, d.MinDwell, d.Hysteresis, d.Loiter, time.Hour)},
		{"everything", &geofencepb.DebounceSettings{MinSamples: 1, MinDwellMs: 1, HysteresisM: 1, LoiterMs: 1, SilenceTimeoutMs: 1},
			ov(1, time.Millisecond, 1, time.Millisecond, time.Millisecond)},
		{"negative values are carried for Validate", &geofencepb.DebounceSettings{MinDwellMs: -1, HysteresisM: -2},
			ov(d.MinSamples, -time.Millisecond, -2, d.Loiter, d.SilenceTimeout)},
		{"detector", &geofencepb.DebounceSettings{Detector: "strict"}, strict},
		{"huge milliseconds saturate", &geofencepb.DebounceSettings{LoiterMs: math.MaxInt64, MinDwellMs: math.MinInt64},
			ov(d.MinSamples, math.MinInt64, d.Hysteresis, math.MaxInt64, d.SilenceTimeout)},
	}
	for _, tt := range tests {
		if got := Resolve(d, tt.p); got != tt.want {
			t.Errorf("%s: Resolve = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// Resolve overlays on whatever defaults it is given, not on the package's.
	custom := Settings{MinSamples: 9, MinDwell: time.Second, Hysteresis: 3, Loiter: time.Hour, SilenceTimeout: time.Hour}
	if got := Resolve(custom, &geofencepb.DebounceSettings{HysteresisM: 4}); got.MinSamples != 9 || got.Hysteresis != 4 {
		t.Errorf("Resolve(custom) = %+v", got)
	}
	// NaN is non-zero, so it is carried, and Validate rejects it.
	if got := Resolve(d, &geofencepb.DebounceSettings{HysteresisM: math.NaN()}); got.Validate() == nil {
		t.Errorf("NaN hysteresis resolved to %+v and validated", got)
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultSettings()
	with := func(f func(*Settings)) Settings { s := ok; f(&s); return s }
	tests := []struct {
		name string
		s    Settings
		want []string // substrings of the error; nil = valid
	}{
		{"defaults", ok, nil},
		{"raw detector", Settings{MinSamples: 1, SilenceTimeout: time.Minute}, nil},
		{"at the limits", Settings{MinSamples: MaxMinSamples, MinDwell: MaxMinDwell, Hysteresis: MaxHysteresis, Loiter: MaxLoiter, SilenceTimeout: MaxSilenceTimeout}, nil},
		{"strict detector", with(func(s *Settings) { s.Detector = DetectorStrict; s.FalseAlarm = 0 }), nil},
		{"unknown detector", with(func(s *Settings) { s.Detector = "bayes" }), []string{`unknown detector "bayes"`}},
		{"false alarm not a probability", with(func(s *Settings) { s.FalseAlarm = 0 }), []string{"FalseAlarm is 0"}},
		{"missed detection NaN", with(func(s *Settings) { s.MissedDetection = math.NaN() }), []string{"MissedDetection is NaN"}},
		{"missed detection a coin toss", with(func(s *Settings) { s.MissedDetection = 0.5 }), []string{"MissedDetection is 0.5"}},
		{"resolution zero", with(func(s *Settings) { s.ResolutionM = 0 }), []string{"ResolutionM is 0"}},
		{"zero samples", with(func(s *Settings) { s.MinSamples = 0 }), []string{"MinSamples is 0"}},
		{"negative samples", with(func(s *Settings) { s.MinSamples = -3 }), []string{"MinSamples is -3"}},
		{"too many samples", with(func(s *Settings) { s.MinSamples = MaxMinSamples + 1 }), []string{"MinSamples", "limit"}},
		{"negative dwell", with(func(s *Settings) { s.MinDwell = -time.Second }), []string{"MinDwell is -1s", "negative"}},
		{"dwell in the wrong unit", with(func(s *Settings) { s.MinDwell = 10_000 * time.Hour }), []string{"MinDwell", "unit"}},
		{"negative hysteresis", with(func(s *Settings) { s.Hysteresis = -1 }), []string{"Hysteresis is -1 m"}},
		{"NaN hysteresis", with(func(s *Settings) { s.Hysteresis = math.NaN() }), []string{"Hysteresis is NaN", "finite"}},
		{"infinite hysteresis", with(func(s *Settings) { s.Hysteresis = math.Inf(1) }), []string{"Hysteresis is +Inf"}},
		{"hysteresis in millimetres", with(func(s *Settings) { s.Hysteresis = 25_000_000 }), []string{"Hysteresis", "limit"}},
		{"negative loiter", with(func(s *Settings) { s.Loiter = -1 }), []string{"Loiter", "negative"}},
		{"loiter too long", with(func(s *Settings) { s.Loiter = MaxLoiter + 1 }), []string{"Loiter", "limit"}},
		{"zero silence timeout", with(func(s *Settings) { s.SilenceTimeout = 0 }), []string{"SilenceTimeout is 0", "positive"}},
		{"negative silence timeout", with(func(s *Settings) { s.SilenceTimeout = -time.Minute }), []string{"SilenceTimeout", "negative"}},
		{"silence timeout too long", with(func(s *Settings) { s.SilenceTimeout = math.MaxInt64 }), []string{"SilenceTimeout", "limit"}},
		{"zero value reports every field at once", Settings{}, []string{"MinSamples", "SilenceTimeout"}},
		{"several at once", Settings{MinSamples: -1, MinDwell: -1, Hysteresis: -1, Loiter: -1, SilenceTimeout: -1},
			[]string{"MinSamples", "MinDwell", "Hysteresis", "Loiter", "SilenceTimeout"}},
	}
	for _, tt := range tests {
		err := tt.s.Validate()
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: %+v validated, want an error", tt.name, tt.s)
			continue
		}
		if !errors.Is(err, ErrInvalidSettings) {
			t.Errorf("%s: %v does not wrap ErrInvalidSettings", tt.name, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, w)
			}
		}
	}
}
