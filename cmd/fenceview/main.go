// Command fenceview serves fencestream's query API, live web page and
// metrics over views of the debouncer and occupancy tables. Run as many
// replicas as needed: each holds whole copies of both tables and answers
// every key; none joins a consumer group.
//
//	fenceview --brokers localhost:9092 --listen 127.0.0.1:8080
//
// See package processors/fenceview for the routes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fencestream/fencestream/cmd/daemon"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

func main() {
	ctx, stop := daemon.SignalContext()
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return // -h: usage printed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fenceview:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenceview", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cl       cluster.Config
		logFlags daemon.LogFlags
		mapCfg   fenceview.MapConfig
		httpf    daemon.HTTPFlags
	)
	cl.RegisterFlags(fs)
	logFlags.Register(fs)
	mapCfg.RegisterFlags(fs)
	httpf.Register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address (a bare :port binds 127.0.0.1)")
	partitions := fs.Int("partitions", int(topology.DefaultPartitions), "partition count of the keyed topics; must match the broker")
	noCreate := fs.Bool("no-create-topics", false, "only check the broker's topics against the topology; do not create missing ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *partitions < 1 || *partitions > fenceview.MaxPartitions {
		return fmt.Errorf("--partitions %d: want 1..%d", *partitions, fenceview.MaxPartitions)
	}
	log, err := logFlags.Logger(stderr)
	if err != nil {
		return err
	}
	if len(cl.Brokers) == 0 {
		return errors.New("no brokers: give --brokers or FENCESTREAM_BROKERS (the all-in-one `go run ./cmd/fencestream` runs an embedded broker)")
	}
	if err := cl.Validate(); err != nil {
		return err
	}
	if err := mapCfg.Validate(); err != nil {
		return err
	}
	if err := httpf.Validate(); err != nil {
		return err
	}
	l, err := daemon.Listen(*listen)
	if err != nil {
		return err
	}
	return fenceview.Run(ctx, fenceview.Options{
		Cluster:        cl,
		Listener:       l,
		Partitions:     int32(*partitions),
		NoCreateTopics: *noCreate,
		Log:            log,
		ServerOpts:     []fenceview.Opt{fenceview.WithMap(mapCfg), fenceview.WithMaxStreams(httpf.MaxStreams)},
		HTTP:           httpf.Opts(),
	})
}
