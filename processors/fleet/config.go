package fleet

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults applied by [New] to zero fields of a [Config].
const (
	DefaultParkedOffsetM = 5.0
	DefaultParkedFarM    = 60.0
	DefaultNoiseSigmaM   = 5.0
	DefaultInterval      = time.Second
	DefaultSpeedMPS      = 12.0
	DefaultMinGap        = 60 * time.Second
	DefaultHysteresisM   = 25.0
	DefaultLap           = 30 * time.Minute
)

// DefaultStart is the event time of the first ping when Config.Start is
// zero: a fixed instant, so that a seed alone reproduces every ping. A
// function, not a variable, so no caller can move every other caller's start.
func DefaultStart() time.Time { return time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC) }

// ErrInvalidConfig is wrapped by every error New returns for a bad Config
// or fence set.
var ErrInvalidConfig = errors.New("fleet: invalid config")

// ErrNoRoute is wrapped by the error New returns when it cannot draw a route
// that satisfies the truth rules for some device (the fence set is too dense,
// or Duration too short for MinGap).
var ErrNoRoute = errors.New("fleet: no valid route")

// Config describes a simulated fleet. The zero value of every field but Seed,
// Moving, Parked and Duration means "use the default".
type Config struct {
	// Seed makes the whole simulation reproducible: the same Seed, Config
	// and fences give identical pings and truth.
	Seed int64
	// Moving is the number of devices driving routes through fences
	// ("veh-0001", ...).
	Moving int
	// Parked is the number of devices parked near fence edges
	// ("park-0001", ...).
	Parked int
	// ParkedOffsetM is the true distance (metres, >= 0) of a parked device
	// from the edge of its fence; parked devices alternate inside and
	// outside (even index inside). Default 5.
	ParkedOffsetM float64
	// FarParked is how many of the Parked devices are parked ParkedFarM
	// from the edge instead (every k-th device). 0 means Parked/5; negative
	// means none.
	FarParked int
	// ParkedFarM is the edge distance of the far parked devices. Default 60.
	ParkedFarM float64
	// NoiseSigmaM is the GPS noise σ in metres, applied independently to
	// each horizontal axis. Default 5.
	NoiseSigmaM float64
	// Interval is the ping interval of every device, truncated to whole
	// milliseconds. Default 1s; at least 1ms.
	Interval time.Duration
	// Duration is the simulated time span: pings at Start, Start+Interval,
	// ... before Start+Duration. 0 means forever: routes are closed laps of
	// Lap that repeat, Stream never ends, and Pings and Truth cover one lap.
	Duration time.Duration
	// Lap is the lap length when Duration is 0, rounded up to a multiple
	// of Interval. Default 30 min.
	Lap time.Duration
	// Start is the event time of the first ping. Default DefaultStart.
	Start time.Time
	// SpeedMPS is the driving speed of moving devices. Default 12.
	SpeedMPS float64
	// AccuracyM is the accuracy radius reported in every ping. Default
	// NoiseSigmaM.
	AccuracyM float64
	// MinGap is the least time a moving device spends clearly on one side
	// of a fence between two true transitions of that fence (and after its
	// last one). Default 60s.
	MinGap time.Duration
	// HysteresisM is the exit hysteresis assumed for fences that do not set
	// their own (the debouncer's default). It widens the band a true
	// crossing must clear on the outside. Default 25.
	HysteresisM float64
	// StampHLC stamps each ping's HLC with hlc.Pack(DeviceTimeMs, 0)
	// (strictly increasing per device). By default HLC is left 0 for the
	// producer to stamp.
	StampHLC bool
	// Pace paces Stream: simulated seconds per wall-clock second (1 = real
	// time, 10 = ten times faster). 0 means as fast as fn consumes.
	Pace float64
}

// withDefaults returns c with defaults applied, or an error wrapping
// ErrInvalidConfig.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Moving < 0 || c.Parked < 0 {
		return bad("moving %d, parked %d: counts must be >= 0", c.Moving, c.Parked)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"parked_offset_m", c.ParkedOffsetM}, {"parked_far_m", c.ParkedFarM}, {"noise_sigma_m", c.NoiseSigmaM},
		{"speed_mps", c.SpeedMPS}, {"accuracy_m", c.AccuracyM}, {"hysteresis_m", c.HysteresisM}, {"pace", c.Pace}} {
		if !finite(f.v) || f.v < 0 {
			return bad("%s %v: want a finite value >= 0", f.name, f.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"interval", c.Interval}, {"duration", c.Duration}, {"lap", c.Lap}, {"min_gap", c.MinGap}} {
		if d.v < 0 {
			return bad("%s %v is negative", d.name, d.v)
		}
	}
	if c.ParkedOffsetM == 0 {
		c.ParkedOffsetM = DefaultParkedOffsetM
	}
	if c.ParkedFarM == 0 {
		c.ParkedFarM = DefaultParkedFarM
	}
	if c.FarParked == 0 {
		c.FarParked = c.Parked / 5
	}
	if c.FarParked < 0 {
		c.FarParked = 0
	}
	if c.FarParked > c.Parked {
		return bad("far_parked %d exceeds parked %d", c.FarParked, c.Parked)
	}
	if c.NoiseSigmaM == 0 {
		c.NoiseSigmaM = DefaultNoiseSigmaM
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Interval < time.Millisecond {
		return bad("interval %v is below 1ms", c.Interval)
	}
	c.Interval = c.Interval.Truncate(time.Millisecond)
	if c.Lap == 0 {
		c.Lap = DefaultLap
	}
	if r := c.Lap % c.Interval; r != 0 {
		c.Lap += c.Interval - r
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart()
	}
	if c.SpeedMPS == 0 {
		c.SpeedMPS = DefaultSpeedMPS
	}
	if c.AccuracyM == 0 {
		c.AccuracyM = c.NoiseSigmaM
	}
	if c.MinGap == 0 {
		c.MinGap = DefaultMinGap
	}
	if c.HysteresisM == 0 {
		c.HysteresisM = DefaultHysteresisM
	}
	if c.Duration == 0 && c.Lap < 4*c.MinGap {
		return bad("lap %v is shorter than 4 × min_gap %v", c.Lap, c.MinGap)
	}
	return c, nil
}
