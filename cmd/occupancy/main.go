// Command occupancy runs the occupancy processor: triggers keyed by device_id
// in from fence-triggers, re-keyed by fence_id through occupancy-loop (the
// topology's declared ordering boundary), and an exact device count per fence
// in the occupancy-table group table. It exports its lag behind the trigger
// stream as fencestream_occupancy_lag_records{topic,partition}.
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
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/occupancy"
)

func main() {
	ctx, stop := daemon.SignalContext()
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "occupancy:", err)
		os.Exit(1)
	}
}

// run parses args and runs until ctx ends (SIGINT/SIGTERM in main). started,
// if set, is called once the processor is ready (tests).
func run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	fs := flag.NewFlagSet("occupancy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		pf         daemon.ProcessorFlags
		devicesCap = fs.Int("devices-cap", occupancy.DefaultDevicesCap, "devices listed per fence for display (counts stay exact)")
		horizon    = fs.Duration("horizon", occupancy.DefaultHorizon, "how long a fence remembers a device that left (trigger HLC time); must exceed how late a trigger can arrive")
		lagEvery   = fs.Duration("lag-interval", 10*time.Second, "how often the lag behind fence-triggers is measured and exported")
	)
	pf.Cluster.ClientID = "fencestream-occupancy"
	pf.Register(fs, "127.0.0.1:9102")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: occupancy --brokers HOST:PORT --state-dir DIR [flags]")
		fmt.Fprintln(fs.Output(), "\nCounts devices per fence from fence-triggers, re-keyed by fence_id across the declared ordering boundary.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := pf.Validate(fs); err != nil {
		return err
	}
	if *devicesCap <= 0 {
		return fmt.Errorf("--devices-cap must be positive, got %d", *devicesCap)
	}
	if *horizon <= 0 {
		return fmt.Errorf("--horizon must be positive, got %v", *horizon)
	}
	if *lagEvery <= 0 {
		return fmt.Errorf("--lag-interval must be positive, got %v", *lagEvery)
	}
	log, err := pf.Logger(stderr)
	if err != nil {
		return err
	}
	topo, err := pf.Topology()
	if err != nil {
		return err
	}

	var ready daemon.Readiness
	onStarted := func(p *group.Processor) {
		ready.Add(p.Ready)
		if started != nil {
			started(p)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.ServeMetrics(gctx, pf.MetricsAddr, log, &ready) })
	g.Go(func() error {
		return occupancy.Run(gctx, pf.Cluster, occupancy.RunConfig{
			Topology:     topo,
			StateDir:     pf.StateDir,
			HotStandby:   pf.HotStandby,
			RecoverAhead: pf.RecoverAhead,
			Group:        pf.GroupOpts(),
			DevicesCap:   *devicesCap,
			Horizon:      *horizon,
			LagEvery:     *lagEvery,
			Log:          log,
			Started:      onStarted,
		})
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		return err
	}
	log.Info("occupancy stopped")
	return nil
}
