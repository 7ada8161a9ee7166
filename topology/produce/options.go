package produce

import (
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"math"
	"time"

	pb "github.com/fencestream/fencestream/codecs/hotkeypb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Opt configures New. Every option overrides one default of defaultConfig,
// which its doc names; New checks them together (config.validate) and
// refuses bad ones with an error naming each.
type Opt func(*config)

// HotKeyPolicy says when a key is hot and what to do about it.
type HotKeyPolicy struct {
	// Threshold is the rate, in records per second for one key averaged over
	// Window, above which the key is hot. Zero or less turns detection off.
	Threshold float64
	// Window is the span the rate is measured over (default 10s).
	Window time.Duration
	// SaltBuckets is how many salted keys a hot key is split into on topics
	// that allow salting (default 8, at least 2).
	SaltBuckets int
	// Now is the wall clock for measuring rates (default time.Now); tests
	// inject one so they never sleep.
	Now func() time.Time
}

// Defaults of the hot-key policy: a device reporting at 1 Hz is far below the
// threshold; one stuck in a retry loop or reporting at 50 Hz is far above.
const (
	DefaultHotKeyThreshold   = 100.0
	DefaultHotKeyWindow      = 10 * time.Second
	DefaultHotKeySaltBuckets = 8
)

type config struct {
	clock       *hlc.Clock
	keyLimit    int
	hot         HotKeyPolicy
	recorder    func(*pb.HotKey)
	recorderSet bool
	logger      *slog.Logger
	linger      time.Duration
	lingerSet   bool
	closeWait   time.Duration
	registerer  prometheus.Registerer
}

// defaultConfig is the one place a producer's defaults are written (the
// hot-key recorder's default, a topic writer, is made by New when
// recorderSet is false).
func defaultConfig() config {
	return config{
		clock:      hlc.New(nil),
		logger:     slog.Default(),
		keyLimit:   topology.MaxKeyBytes,
		registerer: prometheus.DefaultRegisterer,
		closeWait:  DefaultCloseTimeout,
		hot: HotKeyPolicy{
			Threshold:   DefaultHotKeyThreshold,
			Window:      DefaultHotKeyWindow,
			SaltBuckets: DefaultHotKeySaltBuckets,
			Now:         time.Now,
		},
	}
}

// HLC sets the hybrid logical clock that stamps records, overriding the
// default hlc.New(nil) (a clock of its own, reading time.Now); nil keeps the
// default. Share one clock between producers of one process to order their
// records together. (A wall clock, func() time.Time, is named Now wherever
// an option takes one.)
func HLC(c *hlc.Clock) Opt {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// KeyLimit sets the longest key accepted, in bytes, overriding the default
// topology.MaxKeyBytes (255). Consumers must apply the same limit, or they
// dead-letter what this producer wrote.
func KeyLimit(n int) Opt { return func(cfg *config) { cfg.keyLimit = n } }

// HotKeys replaces the hot-key policy, overriding the default of
// DefaultHotKeyThreshold records per second per key over
// DefaultHotKeyWindow, split into DefaultHotKeySaltBuckets where the topic
// allows salting. Zero Window, SaltBuckets and Now take their defaults; a
// Threshold of zero turns detection off.
func HotKeys(p HotKeyPolicy) Opt {
	return func(cfg *config) {
		if p.Window == 0 {
			p.Window = DefaultHotKeyWindow
		}
		if p.SaltBuckets == 0 {
			p.SaltBuckets = DefaultHotKeySaltBuckets
		}
		if p.Now == nil {
			p.Now = time.Now
		}
		cfg.hot = p
	}
}

// HotKeyRecorder sends hot-key decisions to fn instead of the default,
// which writes them to the compacted topology.TopicHotKeys topic under the
// key "<topic>/<key>" through a Goka emitter sharing this producer's
// connection. fn runs on the emitting goroutine and must not block; nil
// records nowhere (the metric and the log remain).
func HotKeyRecorder(fn func(*pb.HotKey)) Opt {
	return func(cfg *config) { cfg.recorder, cfg.recorderSet = fn, true }
}

// Logger sets the logger for hot-key reports and failures to record them,
// overriding the default slog.Default(); nil keeps the default.
func Logger(l *slog.Logger) Opt {
	return func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	}
}

// Linger sets how long the client waits to fill a batch before sending
// it, overriding the default of the sarama config from cluster.Config
// (Goka's 100ms flush frequency). A synchronous Emit takes at least this
// long; 0 sends as soon as the previous request is answered.
func Linger(d time.Duration) Opt {
	return func(cfg *config) { cfg.linger, cfg.lingerSet = d, true }
}

// DefaultCloseTimeout bounds how long Close waits for records in flight.
const DefaultCloseTimeout = 30 * time.Second

// CloseTimeout sets how long Close waits for records in flight to be
// acknowledged, overriding DefaultCloseTimeout. Goka's emitter would otherwise
// wait for as long as the client keeps retrying.
func CloseTimeout(d time.Duration) Opt { return func(cfg *config) { cfg.closeWait = d } }

// Registerer sets where the producer's metrics are registered (default
// prometheus.DefaultRegisterer).
func Registerer(reg prometheus.Registerer) Opt {
	return func(cfg *config) { cfg.registerer = reg }
}

// validate refuses options that cannot work, naming each.
func (c *config) validate() error {
	var errs []error
	if c.linger < 0 {
		errs = append(errs, fmt.Errorf("Linger: must not be negative, got %v", c.linger))
	}
	if c.closeWait <= 0 {
		errs = append(errs, fmt.Errorf("CloseTimeout: must be positive, got %v", c.closeWait))
	}
	if c.keyLimit <= 0 {
		errs = append(errs, fmt.Errorf("KeyLimit: must be positive, got %d", c.keyLimit))
	}
	if h := c.hot; h.Threshold > 0 || math.IsNaN(h.Threshold) {
		switch {
		case math.IsNaN(h.Threshold) || math.IsInf(h.Threshold, 0):
			errs = append(errs, fmt.Errorf("HotKeys: threshold must be finite, got %v", h.Threshold))
		case h.Window <= 0:
			errs = append(errs, fmt.Errorf("HotKeys: window must be positive, got %v", h.Window))
		case h.SaltBuckets < 2 || h.SaltBuckets > 1000:
			errs = append(errs, fmt.Errorf("HotKeys: salt buckets must be between 2 and 1000, got %d", h.SaltBuckets))
		}
	}
	if c.registerer == nil {
		errs = append(errs, errors.New("Registerer: nil registerer"))
	}
	return errors.Join(errs...)
}
