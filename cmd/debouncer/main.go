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
	"math"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/cmd/internal/daemon"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
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
		cl         cluster.Config
		logs       daemon.LogFlags
		stateDir   = fs.String("state-dir", "", "directory for the group table's local state (required)")
		standby    = fs.Bool("hot-standby", false, "keep warm copies of other partitions' state for fast takeover")
		ahead      = fs.Bool("recover-ahead", false, "recover newly assigned partitions before the rebalance completes")
		partitions = fs.Int("partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (must match the broker)")
		metrics    = fs.String("metrics-addr", "127.0.0.1:9101", "address for /metrics and /healthz (empty: off)")
		sweep      = fs.Duration("sweep-interval", 30*time.Second, "how often silent devices are checked for TIMEOUT exits")
		defaults   = debounce.DefaultSettings()
	)
	cl.ClientID = "fencestream-debouncer"
	cl.RegisterFlags(fs)
	logs.Register(fs)
	fs.IntVar(&defaults.MinSamples, "min-samples", defaults.MinSamples, "consecutive samples that confirm a transition (fences may override)")
	fs.DurationVar(&defaults.MinDwell, "min-dwell", defaults.MinDwell, "event time a transition must last to be confirmed")
	fs.Float64Var(&defaults.Hysteresis, "hysteresis", defaults.Hysteresis, "metres outside the edge a device must be to exit")
	fs.DurationVar(&defaults.Loiter, "loiter", defaults.Loiter, "time inside before DWELL fires")
	fs.DurationVar(&defaults.SilenceTimeout, "silence-timeout", defaults.SilenceTimeout, "silence while inside before an EXIT with reason TIMEOUT")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: debouncer --brokers HOST:PORT --state-dir DIR [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *partitions <= 0 || *partitions > math.MaxInt32 {
		return fmt.Errorf("--partitions must be between 1 and %d, got %d", math.MaxInt32, *partitions)
	}
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	if err := cl.Validate(); err != nil {
		return fmt.Errorf("%w (set --brokers or FENCESTREAM_BROKERS)", err)
	}
	if err := defaults.Validate(); err != nil {
		return err
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	ctx, stop := daemon.SignalContext()
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.ServeMetrics(ctx, *metrics, log) })
	g.Go(func() error {
		return debounce.Run(ctx, cl, debounce.RunConfig{
			Topology:     topology.Geofence(topology.WithPartitions(int32(*partitions))),
			StateDir:     *stateDir,
			HotStandby:   *standby,
			RecoverAhead: *ahead,
			SweepEvery:   *sweep,
			Defaults:     defaults,
			Log:          log,
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
