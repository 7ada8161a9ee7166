// Command fenceview serves fencestream's query API, live web page and
// metrics over views of the debouncer and occupancy tables. Run as many
// replicas as needed: by default each holds whole copies of the tables and
// answers every key; none joins a consumer group. With --state-dir the
// copies are kept on disk and a restart only catches up.
//
//	fenceview --brokers localhost:9092 --listen 127.0.0.1:8080 --state-dir /var/lib/fenceview
//
// For fleets beyond one replica's disk, each replica holds a share of the
// partitions and reads the others from its peers, so every replica still
// answers every key:
//
//	fenceview --replica 0 --replicas 2 --peers http://10.0.0.1:8080,http://10.0.0.2:8080 ...
//	fenceview --shard 0-11 --peers 12-23=http://10.0.0.2:8080 ...
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

	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

func main() {
	ctx, stop := host.SignalContext()
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
		logFlags host.LogFlags
		mapCfg   fenceview.MapConfig
		httpf    host.HTTPFlags
	)
	cl.RegisterFlags(fs)
	logFlags.Register(fs)
	mapCfg.RegisterFlags(fs)
	httpf.Register(fs)
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address (a bare :port binds 127.0.0.1)")
	partitions := fs.Int("partitions", int(topology.DefaultPartitions), "partition count of the keyed topics; must match the broker")
	noCreate := fs.Bool("no-create-topics", false, "only check the broker's topics against the topology; do not create missing ones")
	stateDir := fs.String("state-dir", "", "keep the views' tables on disk (Pebble) here, so a restart catches up instead of rebuilding (default: in memory, rebuilt at every start)")
	shard := fs.String("shard", "", "hold only these partitions of the tables, e.g. 0-11 (needs --peers for the rest; default: every partition)")
	replica := fs.Int("replica", -1, "this replica's index, 0..replicas-1: hold the replica's block of partitions (with --replicas and --peers)")
	replicas := fs.Int("replicas", 0, "number of replicas sharing the partitions (with --replica)")
	maxStale := fs.Duration("max-staleness", fenceview.DefaultMaxStaleness, "how old the views' data may be (not confirmed current with the brokers) before /readyz and reads answer 503; every answer carries its age in "+fenceview.DataAgeHeader)
	peers := fs.String("peers", "", "replicas holding the other partitions: one base URL per replica in replica order (with --replica), or PARTITIONS=URL entries (with --shard)")
	subsWrites := fs.Bool("subscription-writes", false, "serve PUT/DELETE /v1/subscriptions/{id} and POST /v1/subscriptions/{id}/disable, writing the subscriptions topic (default: read-only, those answer 405); put fenceview behind an authenticating proxy first: the API has no authentication")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *maxStale <= 0 {
		return fmt.Errorf("--max-staleness must be positive, got %s", *maxStale)
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
	sh, err := shardFlags(*shard, *replica, *replicas, *peers, int32(*partitions))
	if err != nil {
		return err
	}
	l, err := host.Listen(*listen)
	if err != nil {
		return err
	}
	mods := modules.All(nil)
	topo, err := host.Compose(modules.Base(int32(*partitions)), mods...)
	if err != nil {
		return err
	}
	opts := []fenceview.Opt{
		fenceview.Topology(topo),
		fenceview.ModuleRoutes(host.Routes(mods...)...),
		fenceview.Partitions(int32(*partitions)),
		fenceview.Logger(log),
		fenceview.Map(mapCfg), fenceview.MaxStreams(httpf.MaxStreams),
		fenceview.HTTP(httpf.Opts()...),
		fenceview.StateDir(*stateDir),
		fenceview.Sharding(sh),
		fenceview.MaxStaleness(*maxStale),
	}
	if *noCreate {
		opts = append(opts, fenceview.NoCreateTopics())
	}
	if *subsWrites {
		opts = append(opts, fenceview.WritableSubscriptions())
	}
	return fenceview.Run(ctx, cl, l, opts...)
}

// shardFlags builds the replica's shard from --shard or --replica/--replicas
// and --peers (nil: every partition, no peers).
func shardFlags(shard string, replica, replicas int, peers string, n int32) (*fenceview.Shard, error) {
	byIndex := replica >= 0 || replicas > 0
	switch {
	case shard == "" && !byIndex:
		if peers != "" {
			return nil, errors.New("--peers without --shard or --replica/--replicas")
		}
		return nil, nil
	case shard != "" && byIndex:
		return nil, errors.New("give --shard or --replica/--replicas, not both")
	}
	var own []int32
	var err error
	if byIndex {
		if own, err = fenceview.ReplicaPartitions(replica, replicas, n); err != nil {
			return nil, fmt.Errorf("--replica/--replicas: %w", err)
		}
	} else if own, err = fenceview.ParsePartitions(shard); err != nil {
		return nil, fmt.Errorf("--shard: %w", err)
	}
	var ps []fenceview.Peer
	if peers != "" { // none: own must be every partition (Validate says which are missing)
		if ps, err = fenceview.ParsePeers(peers, replica, replicas, n, own); err != nil {
			return nil, fmt.Errorf("--peers: %w", err)
		}
	}
	sh := &fenceview.Shard{Partitions: own, Peers: ps}
	if err := sh.Validate(n); err != nil {
		return nil, err
	}
	return sh, nil
}
