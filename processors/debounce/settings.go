package debounce

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Settings are the resolved debounce parameters of one fence.
//
// The zero value is not usable: start from [DefaultSettings] and overlay a
// fence's own settings with [Resolve], then [Settings.Validate] the result.
type Settings struct {
	MinSamples     int           // consecutive confirming samples, default 3
	MinDwell       time.Duration // event-time span of the confirming samples, default 10s
	Hysteresis     float64       // metres the point must be outside the edge to count for exit, default 25
	Loiter         time.Duration // time inside before DWELL fires once, default 5m
	SilenceTimeout time.Duration // silence while INSIDE before a TIMEOUT exit, default 10m

	// Detector is the rule that confirms transitions, default [DetectorSPRT].
	// The zero value is [DetectorStrict], so Settings built field by field
	// keep the meaning they had before detectors existed.
	Detector Detector
	// FalseAlarm (α) and MissedDetection (β) are the error probabilities of
	// one sequential test of the sprt detector for a device ResolutionM from
	// the edge; they set its threshold (see sprt.go). Defaults 0.001, 0.001.
	FalseAlarm      float64
	MissedDetection float64
	// ResolutionM (δ) is the sprt detector's indifference distance: each fix
	// weighs "δ metres inside" against "δ metres outside". Devices closer to
	// the edge than δ take longer to decide and may settle either way.
	// Default 2.5 m.
	ResolutionM float64
	// How the sprt detector weighs a fix's accuracy (see sprt.go): the noise
	// scale of a fix is σ = max(AccuracyFloorM, AccuracyScale × accuracy).
	// AccuracyFloorM (default 5 m) is the least σ any fix is believed to
	// have, whatever it reports; AccuracyScale (default 1) corrects receivers
	// that report optimistic accuracy. Zero means no floor (beyond 1 m) and
	// a scale of 1: the rule before they existed.
	AccuracyFloorM float64
	AccuracyScale  float64
	// ClipSigmas (default 2) censors each fix's evidence at that of a fix
	// ClipSigmas σ from the edge (Huber's robust sequential test), so a
	// multipath outlier weighs no more than a good fix a few metres in.
	// Zero: no censoring (only the per-fix clamp), the rule before it.
	ClipSigmas float64
	// MaxSpeedMS (default 50 m/s) is the fastest a device is believed to
	// move: under sprt a fix farther from the device's previous fix than
	// that speed and the two fixes' noise explain is taken as no
	// information. It is the daemon's, not a fence's: Apply judges a ping
	// once, for every fence. Zero: no such check.
	MaxSpeedMS float64
	// Crossing (default false) emits a CROSS trigger when the segment
	// between two consecutive fixes, neither inside, runs through the fence
	// for more than the two fixes' noise (σ as sprt weighs them) together:
	// a fence a sparse or fast device passed without a fix inside. A fence
	// turns it on with its own setting; one cannot turn off the default.
	Crossing bool
}

// Detector names a rule that confirms transitions.
type Detector string

const (
	// DetectorSPRT accumulates each fix's log-likelihood ratio (Wald's
	// sequential probability ratio test) and confirms when the evidence
	// passes a threshold set from FalseAlarm and MissedDetection.
	DetectorSPRT Detector = "sprt"
	// DetectorStrict counts only fixes whose whole accuracy circle is on
	// the new side (the rule before sprt; the zero Detector means it too).
	DetectorStrict Detector = "strict"
)

// Detectors lists every detector name, the default first.
func Detectors() []Detector { return []Detector{DetectorSPRT, DetectorStrict} }

// ParseDetector returns the detector called name, or an error wrapping
// [ErrInvalidSettings].
func ParseDetector(name string) (Detector, error) {
	for _, d := range Detectors() {
		if string(d) == name {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: unknown detector %q (want sprt or strict)", ErrInvalidSettings, name)
}

// String returns the detector's name; the zero Detector is "strict".
func (d Detector) String() string {
	if d == "" {
		return string(DetectorStrict)
	}
	return string(d)
}

// Defaults of [DefaultSettings].
const (
	DefaultMinSamples     = 3
	DefaultMinDwell       = 10 * time.Second
	DefaultHysteresis     = 25.0
	DefaultLoiter         = 5 * time.Minute
	DefaultSilenceTimeout = 10 * time.Minute

	DefaultDetector        = DetectorSPRT
	DefaultFalseAlarm      = 0.006
	DefaultMissedDetection = 0.006
	DefaultResolutionM     = 2.5
	DefaultAccuracyFloorM  = 5.0
	DefaultAccuracyScale   = 1.0
	DefaultClipSigmas      = 2.0
	DefaultMaxSpeedMS      = 50.0
)

// Upper bounds enforced by [Settings.Validate]. They are generous on purpose:
// their job is to catch unit mistakes (seconds given as milliseconds, km as m),
// not to second-guess an operator.
const (
	MaxMinSamples     = 10_000
	MaxMinDwell       = 24 * time.Hour
	MaxHysteresis     = 100_000.0 // metres
	MaxLoiter         = 365 * 24 * time.Hour
	MaxSilenceTimeout = 365 * 24 * time.Hour
	MaxResolutionM    = 1_000.0 // metres
	MaxAccuracyFloorM = 1_000.0 // metres
	MaxAccuracyScale  = 100.0
	MaxClipSigmas     = 100.0
	MaxMaxSpeedMS     = 100_000.0 // m/s
)

// ErrInvalidSettings is wrapped by every error [Settings.Validate] returns.
var ErrInvalidSettings = errors.New("debounce: invalid settings")

// DefaultSettings returns the project defaults: the sprt detector (α = β =
// 0.01 at 2.5 m from the edge, σ at least 5 m and the reported accuracy,
// evidence censored at 2σ), at least 3 samples over 10 s to confirm, a 25 m
// exit hysteresis, DWELL after 5 min, TIMEOUT after 10 min of silence.
func DefaultSettings() Settings {
	return Settings{
		MinSamples:      DefaultMinSamples,
		MinDwell:        DefaultMinDwell,
		Hysteresis:      DefaultHysteresis,
		Loiter:          DefaultLoiter,
		SilenceTimeout:  DefaultSilenceTimeout,
		Detector:        DefaultDetector,
		FalseAlarm:      DefaultFalseAlarm,
		MissedDetection: DefaultMissedDetection,
		ResolutionM:     DefaultResolutionM,
		AccuracyFloorM:  DefaultAccuracyFloorM,
		AccuracyScale:   DefaultAccuracyScale,
		ClipSigmas:      DefaultClipSigmas,
		MaxSpeedMS:      DefaultMaxSpeedMS,
	}
}

// Resolve overlays the non-zero fields of a fence's settings p on the
// defaults d. A nil p yields d. Zero means "use the default" (proto3 cannot
// tell an unset field from zero), so a fence cannot set a field to zero; a
// negative or out-of-range value is carried through so that
// [Settings.Validate] can report it instead of it being silently replaced.
func Resolve(d Settings, p *geofencepb.DebounceSettings) Settings {
	if p == nil {
		return d
	}
	s := d
	if p.MinSamples != 0 {
		s.MinSamples = int(min(p.MinSamples, math.MaxInt32)) // int may be 32 bits
	}
	if p.MinDwellMs != 0 {
		s.MinDwell = millis(p.MinDwellMs)
	}
	if p.HysteresisM != 0 { // NaN != 0 too, and Validate rejects it
		s.Hysteresis = p.HysteresisM
	}
	if p.LoiterMs != 0 {
		s.Loiter = millis(p.LoiterMs)
	}
	if p.SilenceTimeoutMs != 0 {
		s.SilenceTimeout = millis(p.SilenceTimeoutMs)
	}
	if p.Detector != "" {
		s.Detector = Detector(p.Detector) // an unknown name is left for Validate
	}
	if p.Crossing {
		s.Crossing = true
	}
	return s
}

// millis converts milliseconds to a Duration, saturating instead of
// overflowing so that an absurd value stays absurd for Validate to catch.
func millis(ms int64) time.Duration {
	const lim = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > lim:
		return math.MaxInt64
	case ms < -lim:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// Validate reports every negative, non-finite or absurd field, joined into
// one error that wraps [ErrInvalidSettings]. MinSamples must be at least 1,
// SilenceTimeout must be positive; MinDwell, Hysteresis and Loiter may be
// zero (MinSamples 1, MinDwell 0, Hysteresis 0 is a raw detector under the
// strict rule). Detector must be known; under sprt, FalseAlarm and
// MissedDetection are in (0, 0.5), ResolutionM is positive, and
// AccuracyFloorM, AccuracyScale and ClipSigmas are finite, not negative and
// below their limits.
func (s Settings) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSettings}, args...)...))
	}
	switch {
	case s.MinSamples < 1:
		bad("MinSamples is %d, must be at least 1", s.MinSamples)
	case s.MinSamples > MaxMinSamples:
		bad("MinSamples is %d, above the limit of %d", s.MinSamples, MaxMinSamples)
	}
	checkDur := func(name string, d, limit time.Duration, allowZero bool) {
		switch {
		case d < 0:
			bad("%s is %v, must not be negative", name, d)
		case d == 0 && !allowZero:
			bad("%s is 0, must be positive", name)
		case d > limit:
			bad("%s is %v, above the limit of %v (a unit mistake?)", name, d, limit)
		}
	}
	checkDur("MinDwell", s.MinDwell, MaxMinDwell, true)
	switch {
	case math.IsNaN(s.Hysteresis) || math.IsInf(s.Hysteresis, 0):
		bad("Hysteresis is %v, must be a finite number of metres", s.Hysteresis)
	case s.Hysteresis < 0:
		bad("Hysteresis is %v m, must not be negative", s.Hysteresis)
	case s.Hysteresis > MaxHysteresis:
		bad("Hysteresis is %v m, above the limit of %v m (a unit mistake?)", s.Hysteresis, MaxHysteresis)
	}
	checkDur("Loiter", s.Loiter, MaxLoiter, true)
	checkDur("SilenceTimeout", s.SilenceTimeout, MaxSilenceTimeout, false)
	if s.Detector != "" {
		if _, err := ParseDetector(string(s.Detector)); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Detector == DetectorSPRT {
		for _, p := range []struct {
			name string
			v    float64
		}{{"FalseAlarm", s.FalseAlarm}, {"MissedDetection", s.MissedDetection}} {
			if !(p.v > 0 && p.v < 0.5) { // NaN fails too
				bad("%s is %v, must be a probability in (0, 0.5)", p.name, p.v)
			}
		}
		if !(s.ResolutionM > 0 && s.ResolutionM <= MaxResolutionM) {
			bad("ResolutionM is %v m, must be in (0, %v]", s.ResolutionM, MaxResolutionM)
		}
		for _, p := range []struct {
			name   string
			v, lim float64
		}{{"AccuracyFloorM", s.AccuracyFloorM, MaxAccuracyFloorM}, {"AccuracyScale", s.AccuracyScale, MaxAccuracyScale}, {"ClipSigmas", s.ClipSigmas, MaxClipSigmas}, {"MaxSpeedMS", s.MaxSpeedMS, MaxMaxSpeedMS}} {
			if !(p.v >= 0 && p.v <= p.lim) { // NaN fails too
				bad("%s is %v, must be in [0, %v]", p.name, p.v, p.lim)
			}
		}
	}
	return errors.Join(errs...)
}
