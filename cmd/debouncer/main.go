// Command debouncer runs the debouncer processor: pings keyed by device_id in,
// debounced ENTER/EXIT/DWELL triggers keyed by device_id out, device state in
// the debouncer-table group table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/cmd/daemon"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/group"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "debouncer:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("debouncer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		pf       daemon.ProcessorFlags
		sweep    = fs.Duration("sweep-interval", 30*time.Second, "how often silent devices are checked for TIMEOUT exits")
		defaults = debounce.DefaultSettings()
		maxAcc   = fs.Float64("max-accuracy-m", debounce.DefaultMaxAccuracyM, "largest accuracy radius (metres) a ping may state; vaguer pings, and pings with a non-finite speed or heading, are dead-lettered as implausible")
	)
	pf.Cluster.ClientID = "fencestream-debouncer"
	pf.Register(fs, "127.0.0.1:9101")
	fs.IntVar(&defaults.MinSamples, "min-samples", defaults.MinSamples, "consecutive samples that confirm a transition (fences may override)")
	fs.DurationVar(&defaults.MinDwell, "min-dwell", defaults.MinDwell, "event time a transition must last to be confirmed")
	fs.Float64Var(&defaults.Hysteresis, "hysteresis", defaults.Hysteresis, "metres outside the edge a device must be to exit")
	fs.DurationVar(&defaults.Loiter, "loiter", defaults.Loiter, "time inside before DWELL fires")
	fs.DurationVar(&defaults.SilenceTimeout, "silence-timeout", defaults.SilenceTimeout, "silence while inside before an EXIT with reason TIMEOUT")
	fs.Func("detector", "rule that confirms transitions: sprt (sequential evidence) or strict (whole accuracy circle on the new side); fences may override (default sprt)", func(v string) (err error) {
		defaults.Detector, err = debounce.ParseDetector(v)
		return err
	})
	fs.Float64Var(&defaults.FalseAlarm, "false-alarm", defaults.FalseAlarm, "sprt: false-alarm probability of one test for a device 2.5 m from the edge; sets the threshold")
	fs.Float64Var(&defaults.AccuracyFloorM, "accuracy-floor", defaults.AccuracyFloorM, "sprt: least noise σ (metres) a fix is believed to have, whatever accuracy it reports")
	fs.Float64Var(&defaults.AccuracyScale, "accuracy-scale", defaults.AccuracyScale, "sprt: σ = this × reported accuracy above the floor (above 1 for receivers that under-report)")
	fs.Float64Var(&defaults.ClipSigmas, "clip-sigmas", defaults.ClipSigmas, "sprt: a fix counts at most as one this many σ from the edge (outlier censoring; 0 off)")
	fs.Float64Var(&defaults.MaxSpeedMS, "max-speed", defaults.MaxSpeedMS, "sprt: m/s beyond which a jump from the previous fix makes a fix no evidence (0 off)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: debouncer --brokers HOST:PORT --state-dir DIR [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := pf.Validate(fs); err != nil {
		return err
	}
	if err := defaults.Validate(); err != nil {
		return err
	}
	log, err := pf.Logger(stderr)
	if err != nil {
		return err
	}
	topo, err := pf.Topology()
	if err != nil {
		return err
	}
	ctx, stop := daemon.SignalContext()
	defer stop()
	var ready daemon.Readiness
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.ServeMetrics(ctx, pf.MetricsAddr, log, &ready) })
	g.Go(func() error {
		return debounce.Run(ctx, pf.Cluster, debounce.RunConfig{
			Topology:     topo,
			StateDir:     pf.StateDir,
			HotStandby:   pf.HotStandby,
			RecoverAhead: pf.RecoverAhead,
			Group:        pf.GroupOpts(),
			SweepEvery:   *sweep,
			MaxClockSkew: pf.MaxClockSkew,
			Defaults:     defaults,
			MaxAccuracyM: *maxAcc,
			Log:          log,
			Started:      func(p *group.Processor) { ready.Add(p.Ready) },
		})
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err == nil {
		log.Info("debouncer stopped")
	}
	return err
}
