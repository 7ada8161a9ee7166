package debounce

import (
	"context"
	"flag"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
)

// Name is the debouncer module's name.
const Name = "debouncer"

// Module is the debouncer as binaries host it. Its flags set the debounce
// settings of fences that do not override them (defaults: opts, else
// DefaultSettings) and the accuracy bound; its Run is Run. The group is
// declared by the geofencing topology, so the module declares nothing.
func Module(opts ...Opt) host.Module {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	s := &cfg.defaults
	return host.Define(host.Module{
		Name: Name,
		Flags: func(fs *flag.FlagSet) {
			fs.Float64Var(&cfg.maxAccuracyM, "max-accuracy-m", cfg.maxAccuracyM, "largest accuracy radius (metres) a ping may state; vaguer pings, and pings with a non-finite speed or heading, are dead-lettered as implausible")
			fs.IntVar(&s.MinSamples, "min-samples", s.MinSamples, "consecutive samples that confirm a transition (fences may override)")
			fs.DurationVar(&s.MinDwell, "min-dwell", s.MinDwell, "event time a transition must last to be confirmed")
			fs.Float64Var(&s.Hysteresis, "hysteresis", s.Hysteresis, "metres outside the edge a device must be to exit")
			fs.DurationVar(&s.Loiter, "loiter", s.Loiter, "time inside before DWELL fires")
			fs.DurationVar(&s.SilenceTimeout, "silence-timeout", s.SilenceTimeout, "silence while inside before an EXIT with reason TIMEOUT")
			fs.Func("detector", "rule that confirms transitions: sprt (sequential evidence) or strict (whole accuracy circle on the new side); fences may override (default "+s.Detector.String()+")", func(v string) (err error) {
				s.Detector, err = ParseDetector(v)
				return err
			})
			fs.Float64Var(&s.FalseAlarm, "false-alarm", s.FalseAlarm, "sprt: false-alarm probability of one test for a device 2.5 m from the edge; sets the threshold")
			fs.Float64Var(&s.AccuracyFloorM, "accuracy-floor", s.AccuracyFloorM, "sprt: least noise σ (metres) a fix is believed to have, whatever accuracy it reports")
			fs.Float64Var(&s.AccuracyScale, "accuracy-scale", s.AccuracyScale, "sprt: σ = this × reported accuracy above the floor (above 1 for receivers that under-report)")
			fs.Float64Var(&s.ClipSigmas, "clip-sigmas", s.ClipSigmas, "sprt: a fix counts at most as one this many σ from the edge (outlier censoring; 0 off)")
			fs.Float64Var(&s.MaxSpeedMS, "max-speed", s.MaxSpeedMS, "sprt: m/s beyond which a jump from the previous fix makes a fix no evidence (0 off)")
			fs.BoolVar(&s.Crossing, "crossings", s.Crossing, "emit CROSS for every fence two consecutive fixes, both outside, provably straddle (fences may turn it on with their crossing property)")
		},
		Validate: func() error {
			if !(cfg.maxAccuracyM > 0) {
				return fmt.Errorf("--max-accuracy-m must be positive, got %v", cfg.maxAccuracyM)
			}
			return s.Validate()
		},
		Run: func(ctx context.Context, env host.Env) error {
			return Run(ctx, env, Defaults(*s), MaxAccuracy(cfg.maxAccuracyM), Fences(cfg.fences), Now(cfg.now))
		},
	})
}

// Run follows the fence catalogue (or shares the one Fences gave), waits until it
// has caught up (a debouncer with a half-loaded catalogue would close every
// stay with FENCE_DELETED), then runs the processor (whose timers close silent
// devices) until ctx ends. The group takes env.Group's options.
func Run(ctx context.Context, env host.Env, opts ...Opt) error {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	log := env.Logger()
	cat, ready, follow := cfg.fences.OrNew(geofence.TopicFences).Follow(env.Cluster, log, env.Registerer)
	opts = append(opts, Logger(log))
	if env.Registerer != nil {
		opts = append(opts, Registerer(env.Registerer))
	}
	d, err := New(env.Topology, cat, opts...)
	if err != nil {
		return err
	}
	// Topics must exist before the follower reads the fences topic:
	// Processor checks (and creates) them.
	proc, err := d.Group().Processor(ctx, env.Cluster, append(env.Group, d.ProcessorOpts()...)...)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	if follow != nil {
		g.Go(func() error { return follow(ctx) })
	}
	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-ready:
			log.Info("fence catalogue loaded", "fences", cat.Snapshot().Len(), "version", cat.Snapshot().Version())
		}
		return nil
	})
	env.Log = log
	g.Go(func() error { return host.RunProcessors(ctx, env, Name, ready, proc) })
	return g.Wait()
}
