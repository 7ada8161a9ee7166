// Command visits runs the visits processors (processors/visits): each
// device's ENTER and EXIT per fence paired into visit records on
// fence-visits, and hourly ENTER counts and mean dwell per fence in
// visit-stats-table, re-keyed by fence across the topology's declared
// boundary. fenceview serves them at /v1/fences/{id}/visits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/cmd/daemon"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/visits"
)

func main() {
	ctx, stop := daemon.SignalContext()
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "visits:", err)
		os.Exit(1)
	}
}

// run parses args and runs until ctx ends (SIGINT/SIGTERM in main).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("visits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf daemon.ProcessorFlags
	timerEvery := fs.Duration("timer-interval", 0, "how often due timers (window closes, expiries) are looked for (0: the processors' default)")
	pf.Cluster.ClientID = "fencestream-visits"
	pf.Register(fs, "127.0.0.1:9103")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: visits --brokers HOST:PORT --state-dir DIR [flags]")
		fmt.Fprintln(fs.Output(), "\nPairs ENTER and EXIT triggers into visits and keeps hourly visit statistics per fence.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := pf.Validate(fs); err != nil {
		return err
	}
	if *timerEvery < 0 {
		return fmt.Errorf("--timer-interval must not be negative, got %v", *timerEvery)
	}
	log, err := pf.Logger(stderr)
	if err != nil {
		return err
	}
	topo, err := pf.Topology()
	if err != nil {
		return err
	}
	opts := append([]group.Opt{group.HotStandby(pf.HotStandby), group.RecoverAhead(pf.RecoverAhead)}, pf.GroupOpts()...)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return daemon.ServeMetrics(gctx, pf.MetricsAddr, log, nil) })
	g.Go(func() error {
		return visits.Run(gctx, pf.Cluster, visits.RunConfig{
			Topology: topo, StateDir: pf.StateDir, TimerEvery: *timerEvery, Log: log, Opts: opts,
		})
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		return err
	}
	log.Info("visits stopped")
	return nil
}
