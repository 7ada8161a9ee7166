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
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/cmd/internal/daemon"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
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
		cl         cluster.Config
		logs       daemon.LogFlags
		stateDir   = fs.String("state-dir", "", "directory for the group table's local state (required)")
		standby    = fs.Bool("hot-standby", false, "keep warm copies of other partitions' state for fast takeover")
		ahead      = fs.Bool("recover-ahead", false, "recover newly assigned partitions before the rebalance completes")
		partitions = fs.Int("partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (must match the broker)")
		metrics    = fs.String("metrics-addr", "127.0.0.1:9102", "address for /metrics and /healthz (empty: off)")
		devicesCap = fs.Int("devices-cap", occupancy.DefaultDevicesCap, "devices listed per fence for display (counts stay exact)")
		lagEvery   = fs.Duration("lag-interval", 10*time.Second, "how often the lag behind fence-triggers is measured and exported")
	)
	cl.ClientID = "fencestream-occupancy"
	cl.RegisterFlags(fs)
	logs.Register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: occupancy --brokers HOST:PORT --state-dir DIR [flags]")
		fmt.Fprintln(fs.Output(), "\nCounts devices per fence from fence-triggers, re-keyed by fence_id across the declared ordering boundary.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	if *partitions <= 0 || *partitions > 1<<20 {
		return fmt.Errorf("--partitions must be positive, got %d", *partitions)
	}
	if *devicesCap <= 0 {
		return fmt.Errorf("--devices-cap must be positive, got %d", *devicesCap)
	}
	if *lagEvery <= 0 {
		return fmt.Errorf("--lag-interval must be positive, got %v", *lagEvery)
	}
	if err := cl.Validate(); err != nil {
		return fmt.Errorf("%w (set --brokers or FENCESTREAM_BROKERS)", err)
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	slog.SetDefault(log) // the lag reporter logs to the default logger

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.ServeMetrics(gctx, *metrics, log) })
	g.Go(func() error {
		return occupancy.Run(gctx, cl, occupancy.RunConfig{
			Topology:     topology.Geofence(topology.WithPartitions(int32(*partitions))),
			StateDir:     *stateDir,
			HotStandby:   *standby,
			RecoverAhead: *ahead,
			DevicesCap:   *devicesCap,
			LagEvery:     *lagEvery,
			Log:          log,
			Started:      started,
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
