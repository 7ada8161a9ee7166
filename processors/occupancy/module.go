package occupancy

import (
	"context"
	"flag"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
)

// Name is the occupancy module's name.
const Name = "occupancy"

// DefaultLagInterval is how often the lag behind fence-triggers is measured.
const DefaultLagInterval = 10 * time.Second

// Fences makes Module and Run take the fence catalogue from s (shared
// with the binary's other modules) instead of following the fences topic
// themselves (default: a catalogue of their own). New ignores it: give it
// Catalogue.
func Fences(s *fences.Shared) Opt { return func(c *config) { c.fences = s } }

// LagInterval sets how often Run measures and exports the lag behind
// fence-triggers (default DefaultLagInterval; 0 or negative: never).
func LagInterval(d time.Duration) Opt { return func(c *config) { c.lagEvery = d } }

// Module is occupancy as binaries host it: flags for the record bounds and
// the lag reporter, and Run. The geofencing topology declares the group and
// its boundary, so the module declares nothing.
func Module(opts ...Opt) host.Module {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return host.Define(host.Module{
		Name: Name,
		Flags: func(fs *flag.FlagSet) {
			fs.IntVar(&cfg.limits.DevicesCap, "devices-cap", cfg.limits.DevicesCap, "devices listed per fence for display (counts stay exact)")
			fs.DurationVar(&cfg.limits.Horizon, "horizon", cfg.limits.Horizon, "how long a device's record remembers a fence it left (trigger HLC time); must exceed how late a trigger can arrive")
			fs.IntVar(&cfg.limits.MaxMembers, "max-members", cfg.limits.MaxMembers, "fences one device's record holds (inside, or left within the horizon)")
			fs.DurationVar(&cfg.lagEvery, "lag-interval", cfg.lagEvery, "how often the lag behind fence-triggers is measured and exported")
		},
		Validate: func() error {
			if cfg.limits.DevicesCap <= 0 {
				return fmt.Errorf("--devices-cap must be positive, got %d", cfg.limits.DevicesCap)
			}
			if cfg.limits.Horizon <= 0 {
				return fmt.Errorf("--horizon must be positive, got %v", cfg.limits.Horizon)
			}
			if cfg.limits.MaxMembers <= 0 {
				return fmt.Errorf("--max-members must be positive, got %d", cfg.limits.MaxMembers)
			}
			if err := cfg.limits.Validate(); err != nil {
				return err
			}
			if cfg.lagEvery <= 0 {
				return fmt.Errorf("--lag-interval must be positive, got %v", cfg.lagEvery)
			}
			return nil
		},
		Run: func(ctx context.Context, env host.Env) error {
			return Run(ctx, env, DevicesCap(cfg.limits.DevicesCap), Horizon(cfg.limits.Horizon), MaxMembers(cfg.limits.MaxMembers),
				Fences(cfg.fences), LagInterval(cfg.lagEvery))
		},
	})
}

// Run builds the occupancy processor over env (checking the topology against
// the broker and claiming the state directory), waits for the fence catalogue
// (a half-loaded one would dead-letter triggers of fences it has not read
// yet), then runs it and the lag reporter until ctx ends. A clean stop
// returns nil.
func Run(ctx context.Context, env host.Env, opts ...Opt) error {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	log := env.Logger()
	cat, ready, follow := cfg.fences.OrNew(geofence.TopicFences).Follow(env.Cluster, log.With("component", "fences"), env.Registerer)
	opts = append(opts, Logger(log), Catalogue(cat))
	if env.Registerer != nil {
		opts = append(opts, Registerer(env.Registerer))
	}
	gs, err := New(env.Topology, opts...)
	if err != nil {
		return err
	}
	procs, err := gs.Processors(ctx, env.Cluster, env.Group...)
	if err != nil {
		return err
	}
	eg, ctx := errgroup.WithContext(ctx)
	if follow != nil {
		eg.Go(func() error { return follow(ctx) })
	}
	env.Log = log
	eg.Go(func() error { return host.RunProcessors(ctx, env, Name, ready, procs...) })
	if cfg.lagEvery > 0 {
		eg.Go(func() error { return RunLagReporter(ctx, env.Cluster, cfg.lagEvery, log, env.Registerer) })
	}
	return eg.Wait()
}
