package fenceview

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/httpguard"
	"github.com/fencestream/fencestream/topology"
)

// Opt configures NewServer and Run. One type serves both: Run takes every
// option (it builds the server from the same list), NewServer only the
// server's (MaxStreams, Topology, Logger, Now, Heartbeat, DeviceListCap,
// Map, DebounceDefaults, Route, SubscriptionWrites); an option of Run alone
// given to NewServer is refused, naming it. Every option overrides one
// default of defaultConfig, which its doc names.
type Opt func(*config)

// place is where options are given.
type place int8

const (
	atServer place = iota
	atRun
)

// runOnly is an option that only Run reads: NewServer records it as
// misplaced, by name.
func runOnly(name string, set func(*config)) Opt {
	return func(c *config) {
		if c.at != atRun {
			c.misplaced = append(c.misplaced, fmt.Errorf("%s: an option of Run, given to NewServer", name))
		}
		set(c)
	}
}

type config struct {
	at        place
	misplaced []error

	// The server's (NewServer and Run).
	topo      *topology.Topology // nil: geofence.Topology() at partitions
	log       *slog.Logger
	now       func() time.Time
	heartbeat time.Duration
	deviceCap int
	routes    []route
	mapCfg    MapConfig
	defaults  debounce.Settings
	streams   int
	subs      SubscriptionStore // nil: subscription writes refused

	// Run's.
	partitions      int32
	cat             *fences.Catalogue
	catReady        <-chan struct{}
	noCreate        bool
	shutdownTimeout time.Duration
	http            []httpguard.Opt
	stateDir        string
	hostRoutes      []host.Route
	registerer      prometheus.Registerer
	maxStaleness    time.Duration
	shard           *Shard
	subTopic        bool
}

// defaultConfig is the one place fenceview's defaults are written.
func defaultConfig() config {
	return config{
		log: slog.Default(), now: time.Now, heartbeat: DefaultHeartbeat, deviceCap: DefaultDeviceListCap,
		defaults: debounce.DefaultSettings(), streams: DefaultMaxStreams,
		partitions: topology.DefaultPartitions, shutdownTimeout: 5 * time.Second,
		registerer: prometheus.DefaultRegisterer, maxStaleness: DefaultMaxStaleness,
	}
}

// newConfig is the defaults with opts given at at applied, in order.
func newConfig(at place, opts []Opt) config {
	c := defaultConfig()
	c.at = at
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Partitions is the partition count of the keyed topics (default
// topology.DefaultPartitions, 24), for Run and for the default Topology.
// The broker must agree.
func Partitions(n int32) Opt {
	return runOnly("Partitions", func(c *config) {
		if n != 0 { // 0 keeps the default
			c.partitions = n
		}
	})
}

// Catalogue makes Run read fences from cat, a catalogue the caller keeps up
// to date (the all-in-one runner shares the debouncer's), and wait until
// ready is closed (nil: already loaded). Default: Run follows
// geofence.TopicFences into a catalogue of its own.
func Catalogue(cat *fences.Catalogue, ready <-chan struct{}) Opt {
	return runOnly("Catalogue", func(c *config) { c.cat, c.catReady = cat, ready })
}

// NoCreateTopics makes Run's start-up only check the broker's topics against
// the topology instead of creating missing ones (default: create missing,
// refuse mismatches).
func NoCreateTopics() Opt { return runOnly("NoCreateTopics", func(c *config) { c.noCreate = true }) }

// ShutdownTimeout bounds Run's graceful HTTP shutdown (default 5s).
func ShutdownTimeout(d time.Duration) Opt {
	return runOnly("ShutdownTimeout", func(c *config) { c.shutdownTimeout = d })
}

// HTTP bounds Run's server: timeouts, connection cap, Host allow-list
// (default: httpguard's defaults).
func HTTP(opts ...httpguard.Opt) Opt {
	return runOnly("HTTP", func(c *config) { c.http = append(c.http, opts...) })
}

// StateDir keeps the views' tables in the kit's store (Pebble) under dir,
// one subdirectory per table, so a restart catches up from the stored
// offsets instead of rebuilding (default "": in memory, rebuilt at every
// start).
func StateDir(dir string) Opt { return runOnly("StateDir", func(c *config) { c.stateDir = dir }) }

// ModuleRoutes are the routes of the modules the binary links (host.Routes),
// which Run serves beside fenceview's own, each from its own view (default:
// none). Route serves a handler the caller built.
func ModuleRoutes(rs ...host.Route) Opt {
	return runOnly("ModuleRoutes", func(c *config) { c.hostRoutes = append(c.hostRoutes, rs...) })
}

// Registerer is where Run's metrics go (default prometheus.DefaultRegisterer).
func Registerer(reg prometheus.Registerer) Opt {
	return runOnly("Registerer", func(c *config) { c.registerer = reg })
}

// MaxStaleness is how old the views' data may be (not confirmed current
// with the brokers) before /readyz and reads answer 503 (default
// DefaultMaxStaleness); below it every answer carries its age
// (DataAgeHeader).
func MaxStaleness(d time.Duration) Opt {
	return runOnly("MaxStaleness", func(c *config) { c.maxStaleness = d })
}

// Sharding makes this replica hold only s.Partitions of the debouncer,
// occupancy and visit tables (the kit's partial views) and read every other
// partition from the peer holding it (default nil: views of every
// partition). Views of module routes stay whole.
func Sharding(s *Shard) Opt { return runOnly("Sharding", func(c *config) { c.shard = s }) }

// WritableSubscriptions makes Run serve PUT and DELETE
// /v1/subscriptions/{id} and POST /v1/subscriptions/{id}/disable, writing
// the topology's subscriptions topic (delivery.TopicSubscriptions, which it
// must declare). Default off: the API is read-only and those answer 405.
// SubscriptionWrites gives the server a store of the caller's instead.
func WritableSubscriptions() Opt {
	return runOnly("WritableSubscriptions", func(c *config) { c.subTopic = true })
}

// validateRun refuses Run's options that cannot work, naming each.
func (c *config) validateRun() error {
	var errs []error
	if c.partitions <= 0 {
		errs = append(errs, fmt.Errorf("Partitions: must be positive, got %d", c.partitions))
	}
	if c.cat == nil && c.catReady != nil {
		errs = append(errs, errors.New("Catalogue: a ready channel without a catalogue"))
	}
	if c.shutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ShutdownTimeout: must be positive, got %s", c.shutdownTimeout))
	}
	if c.registerer == nil {
		errs = append(errs, errors.New("Registerer: nil registerer"))
	}
	if c.maxStaleness <= 0 {
		errs = append(errs, fmt.Errorf("MaxStaleness: must be positive, got %s", c.maxStaleness))
	}
	if c.shard != nil && c.partitions > 0 {
		if err := c.shard.Validate(c.partitions); err != nil {
			errs = append(errs, fmt.Errorf("Sharding: %w", err))
		}
	}
	return errors.Join(errs...)
}
