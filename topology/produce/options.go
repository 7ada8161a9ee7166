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

// Opt configures New.
type Opt interface{ apply(*config) }

type opt struct{ fn func(*config) }

func (o opt) apply(c *config) { o.fn(c) }

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

func defaultConfig() config {
	return config{
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

// WithClock sets the hybrid logical clock that stamps records, overriding the
// default hlc.New(nil) (a clock of its own, reading time.Now). Share one clock
// between producers of one process to order their records together.
func WithClock(c *hlc.Clock) Opt { return opt{func(cfg *config) { cfg.clock = c }} }

// WithKeyLimit sets the longest key accepted, in bytes, overriding the default
// topology.MaxKeyBytes (255). Consumers must apply the same limit, or they
// dead-letter what this producer wrote.
func WithKeyLimit(n int) Opt { return opt{func(cfg *config) { cfg.keyLimit = n }} }

// WithHotKeys replaces the hot-key policy, overriding the default of
// DefaultHotKeyThreshold records per second per key over
// DefaultHotKeyWindow, split into DefaultHotKeySaltBuckets where the topic
// allows salting. Zero Window, SaltBuckets and Now take their defaults; a
// Threshold of zero turns detection off.
func WithHotKeys(p HotKeyPolicy) Opt {
	return opt{func(cfg *config) {
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
	}}
}

// WithHotKeyRecorder sends hot-key decisions to fn instead of the default,
// which writes them to the compacted topology.TopicHotKeys topic under the
// key "<topic>/<key>" through a Goka emitter sharing this producer's
// connection. fn runs on the emitting goroutine and must not block; nil
// records nowhere (the metric and the log remain).
func WithHotKeyRecorder(fn func(*pb.HotKey)) Opt {
	return opt{func(cfg *config) { cfg.recorder, cfg.recorderSet = fn, true }}
}

// WithLogger sets the logger for hot-key reports and failures to record them,
// overriding the default slog.Default().
func WithLogger(l *slog.Logger) Opt { return opt{func(cfg *config) { cfg.logger = l }} }

// WithLinger sets how long the client waits to fill a batch before sending
// it, overriding the default of the sarama config from cluster.Config
// (Goka's 100ms flush frequency). A synchronous Emit takes at least this
// long; 0 sends as soon as the previous request is answered.
func WithLinger(d time.Duration) Opt {
	return opt{func(cfg *config) { cfg.linger, cfg.lingerSet = d, true }}
}

// DefaultCloseTimeout bounds how long Close waits for records in flight.
const DefaultCloseTimeout = 30 * time.Second

// WithCloseTimeout sets how long Close waits for records in flight to be
// acknowledged, overriding DefaultCloseTimeout. Goka's emitter would otherwise
// wait for as long as the client keeps retrying.
func WithCloseTimeout(d time.Duration) Opt { return opt{func(cfg *config) { cfg.closeWait = d }} }

// WithRegisterer sets where the producer's metrics are registered (default
// prometheus.DefaultRegisterer).
func WithRegisterer(reg prometheus.Registerer) Opt {
	return opt{func(cfg *config) { cfg.registerer = reg }}
}

func (c *config) validate() error {
	var errs []error
	if c.linger < 0 {
		errs = append(errs, fmt.Errorf("linger must not be negative, got %v", c.linger))
	}
	if c.closeWait <= 0 {
		errs = append(errs, fmt.Errorf("close timeout must be positive, got %v", c.closeWait))
	}
	if c.keyLimit <= 0 {
		errs = append(errs, fmt.Errorf("key limit must be positive, got %d", c.keyLimit))
	}
	if h := c.hot; h.Threshold > 0 || math.IsNaN(h.Threshold) {
		switch {
		case math.IsNaN(h.Threshold) || math.IsInf(h.Threshold, 0):
			errs = append(errs, fmt.Errorf("hot-key threshold must be finite, got %v", h.Threshold))
		case h.Window <= 0:
			errs = append(errs, fmt.Errorf("hot-key window must be positive, got %v", h.Window))
		case h.SaltBuckets < 2 || h.SaltBuckets > 1000:
			errs = append(errs, fmt.Errorf("hot-key salt buckets must be between 2 and 1000, got %d", h.SaltBuckets))
		}
	}
	if c.clock == nil {
		c.clock = hlc.New(nil)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return errors.Join(errs...)
}
