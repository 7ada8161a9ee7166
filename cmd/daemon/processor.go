package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// ProcessorFlags are the flags every processor binary shares: how to reach the
// cluster, where its state lives, standby, partition count, metrics and logs.
type ProcessorFlags struct {
	Cluster      cluster.Config
	Logs         LogFlags
	StateDir     string
	HotStandby   bool
	RecoverAhead bool
	Partitions   int
	MetricsAddr  string
	MaxClockSkew time.Duration
	Storage      statestore.Kind
}

// Register adds the flags to fs; metricsAddr is the binary's default.
func (p *ProcessorFlags) Register(fs *flag.FlagSet, metricsAddr string) {
	p.Cluster.RegisterFlags(fs)
	p.Logs.Register(fs)
	fs.StringVar(&p.StateDir, "state-dir", "", "directory for the group table's local state (required)")
	fs.BoolVar(&p.HotStandby, "hot-standby", false, "keep warm copies of other partitions' state for fast takeover")
	fs.BoolVar(&p.RecoverAhead, "recover-ahead", false, "recover newly assigned partitions before the rebalance completes")
	fs.IntVar(&p.Partitions, "partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (must match the broker)")
	fs.TextVar(&p.Storage, "storage", statestore.Default, statestore.FlagUsage)
	fs.StringVar(&p.MetricsAddr, "metrics-addr", metricsAddr, "address for /metrics and /healthz (empty: off)")
	fs.DurationVar(&p.MaxClockSkew, "max-clock-skew", group.DefaultMaxSkew, "an input whose HLC is further ahead of this machine's clock is dead-lettered (future-hlc)")
}

// Validate checks the parsed flags (and that no stray arguments were given)
// before anything connects.
func (p *ProcessorFlags) Validate(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if p.Partitions <= 0 || p.Partitions > 1<<20 {
		return fmt.Errorf("--partitions must be between 1 and %d, got %d", 1<<20, p.Partitions)
	}
	if p.MaxClockSkew <= 0 {
		return fmt.Errorf("--max-clock-skew must be positive, got %s", p.MaxClockSkew)
	}
	if p.StateDir == "" {
		return errors.New("--state-dir is required")
	}
	if err := p.Cluster.Validate(); err != nil {
		return fmt.Errorf("%w (set --brokers or FENCESTREAM_BROKERS)", err)
	}
	return nil
}

// Topology is the geofencing topology with the flagged partition count,
// extended by every processor registered in the binary.
func (p *ProcessorFlags) Topology() (*topology.Topology, error) {
	return topology.Compose(geofence.Topology(geofence.WithPartitions(int32(p.Partitions))))
}

// GroupOpts are the group options the flags choose.
func (p *ProcessorFlags) GroupOpts() []group.Opt { return []group.Opt{group.Storage(p.Storage)} }

// Logger builds the logger the log flags describe.
func (p *ProcessorFlags) Logger(w io.Writer) (*slog.Logger, error) { return p.Logs.Logger(w) }
