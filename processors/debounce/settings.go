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
}

// Defaults of [DefaultSettings].
const (
	DefaultMinSamples     = 3
	DefaultMinDwell       = 10 * time.Second
	DefaultHysteresis     = 25.0
	DefaultLoiter         = 5 * time.Minute
	DefaultSilenceTimeout = 10 * time.Minute
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
)

// ErrInvalidSettings is wrapped by every error [Settings.Validate] returns.
var ErrInvalidSettings = errors.New("debounce: invalid settings")

// DefaultSettings returns the project defaults: 3 samples over 10 s to
// confirm, a 25 m exit hysteresis, DWELL after 5 min, TIMEOUT after 10 min of
// silence.
func DefaultSettings() Settings {
	return Settings{
		MinSamples:     DefaultMinSamples,
		MinDwell:       DefaultMinDwell,
		Hysteresis:     DefaultHysteresis,
		Loiter:         DefaultLoiter,
		SilenceTimeout: DefaultSilenceTimeout,
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
// zero (MinSamples 1, MinDwell 0, Hysteresis 0 is a raw detector).
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
	return errors.Join(errs...)
}
