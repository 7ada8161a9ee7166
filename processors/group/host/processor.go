package host

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// ProcessorFlags are the flags every processor binary shares: how to reach the
// cluster, where its state lives, standby, partition count, timers, metrics
// and logs. They apply to every group of every module the binary runs.
type ProcessorFlags struct {
	Cluster       cluster.Config
	Logs          LogFlags
	StateDir      string
	HotStandby    bool
	RecoverAhead  bool
	Partitions    int
	MetricsAddr   string
	MaxClockSkew  time.Duration
	TimerInterval time.Duration
	Storage       statestore.Kind
	RecordCache   int
}

// Register adds the flags to fs; metricsAddr is the binary's default.
func (p *ProcessorFlags) Register(fs *flag.FlagSet, metricsAddr string) {
	p.Cluster.RegisterFlags(fs)
	p.Logs.Register(fs)
	fs.StringVar(&p.StateDir, "state-dir", "", "directory for the group tables' local state (required)")
	fs.BoolVar(&p.HotStandby, "hot-standby", false, "keep warm copies of other partitions' state for fast takeover")
	fs.BoolVar(&p.RecoverAhead, "recover-ahead", false, "recover newly assigned partitions before the rebalance completes")
	fs.IntVar(&p.Partitions, "partitions", int(topology.DefaultPartitions), "partition count of the keyed topics (must match the broker)")
	fs.TextVar(&p.Storage, "storage", statestore.Default, statestore.FlagUsage)
	fs.StringVar(&p.MetricsAddr, "metrics-addr", metricsAddr, "address for /metrics, /healthz and /readyz (empty: off)")
	fs.DurationVar(&p.MaxClockSkew, "max-clock-skew", group.DefaultMaxSkew, "an input whose HLC is further ahead of this machine's clock is dead-lettered (future-hlc)")
	fs.DurationVar(&p.TimerInterval, "timer-interval", group.DefaultTimerInterval, "how often every group looks for due timers (silence timeouts, window closes, expiries): a timer fires up to this late")
	fs.IntVar(&p.RecordCache, "record-cache", group.DefaultRecordCache, "bytes of dirty table values each group keeps in memory, writing each key to its store and changelog once per commit interval (group.RecordCache; 0: off)")
}

// Validate checks the parsed flags (and that no stray arguments were given)
// before anything connects, and reports every problem, not the first.
func (p *ProcessorFlags) Validate(fs *flag.FlagSet) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if fs.NArg() > 0 {
		bad("unexpected arguments: %q", fs.Args())
	}
	if p.Partitions <= 0 || p.Partitions > 1<<20 {
		bad("--partitions must be between 1 and %d, got %d", 1<<20, p.Partitions)
	}
	if p.MaxClockSkew <= 0 {
		bad("--max-clock-skew must be positive, got %s", p.MaxClockSkew)
	}
	if p.TimerInterval <= 0 {
		bad("--timer-interval must be positive, got %s", p.TimerInterval)
	}
	if p.RecordCache < 0 {
		bad("--record-cache must not be negative, got %d", p.RecordCache)
	}
	if p.StateDir == "" {
		bad("--state-dir is required")
	}
	if err := p.Cluster.Validate(); err != nil {
		bad("%w (set --brokers or FENCESTREAM_BROKERS)", err)
	}
	return errors.Join(errs...)
}

// GroupOpts are the group options the flags choose, for every group.
func (p *ProcessorFlags) GroupOpts(reg prometheus.Registerer) []group.Opt {
	return []group.Opt{
		group.StateDir(p.StateDir), group.Storage(p.Storage),
		group.HotStandby(p.HotStandby), group.RecoverAhead(p.RecoverAhead),
		group.MaxClockSkew(p.MaxClockSkew), group.TimerInterval(p.TimerInterval),
		group.RecordCache(p.RecordCache), group.Registerer(reg),
	}
}

// Logger builds the logger the log flags describe.
func (p *ProcessorFlags) Logger(w io.Writer) (*slog.Logger, error) { return p.Logs.Logger(w) }

// Binary is a processor binary: the shared processor flags, each module's
// own, the base topology extended by the modules' declarations, a metrics
// and readiness server, and every module's Run.
type Binary struct {
	// Name is the binary's name (usage, client id fencestream-<name>).
	Name string
	// Usage is printed under the usage line of --help.
	Usage string
	// MetricsAddr is the default of --metrics-addr.
	MetricsAddr string
	// Base is the topology the modules extend, at the flagged partition
	// count.
	Base func(partitions int32) *topology.Topology
	// Modules are the modules the binary runs.
	Modules []Module
}

// ExitWait is how long Main lets a signalled binary stop before it exits
// anyway: longer than group.DefaultStopWait, which bounds each processor.
const ExitWait = group.DefaultStopWait + 5*time.Second

// Main runs the binary with the process's arguments until SIGINT or SIGTERM,
// and exits: 0 on a clean stop or --help, 2 on a usage error, 1 on failure.
//
// After SIGINT or SIGTERM a second signal ends the process at once, and a
// process still stopping ExitWait after the first exits with 1.
func Main(b Binary) {
	ctx, stop := SignalContext()
	go func() {
		<-ctx.Done()
		stop() // the signals' default action again: a second one ends the process
		time.AfterFunc(ExitWait, func() {
			fmt.Fprintf(os.Stderr, "%s: still stopping %s after the signal; exiting\n", b.Name, ExitWait)
			os.Exit(1)
		})
	}()
	err := b.Run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, new(UsageError)):
		fmt.Fprintf(os.Stderr, "%s: %v\n", b.Name, err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", b.Name, err)
		os.Exit(1)
	}
}

// UsageError is a refused command line.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Run parses args and runs the binary until ctx ends; started, if set, is
// called with each processor once it is built (tests). A clean stop returns
// nil; --help returns flag.ErrHelp; a bad command line a UsageError.
func (b Binary) Run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	if b.Base == nil {
		return errors.New("host: Binary.Base is nil")
	}
	fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pf ProcessorFlags
	pf.Cluster.ClientID = "fencestream-" + b.Name
	pf.Register(fs, b.MetricsAddr)
	if err := RegisterFlags(fs, b.Modules...); err != nil {
		return err
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s --brokers HOST:PORT --state-dir DIR [flags]\n", b.Name)
		if b.Usage != "" {
			fmt.Fprintf(fs.Output(), "\n%s\n", b.Usage)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err}
	}
	// The modules' flags first and independently: a bad module flag is
	// reported with the missing --brokers or --state-dir, not after it.
	if err := errors.Join(ValidateFlags(b.Modules...), pf.Validate(fs)); err != nil {
		return UsageError{err}
	}
	log, err := pf.Logger(stderr)
	if err != nil {
		return UsageError{err}
	}
	topo, err := Compose(b.Base(int32(pf.Partitions)), b.Modules...)
	if err != nil {
		return err
	}
	var ready Readiness
	env := Env{
		Cluster: pf.Cluster, Topology: topo, Log: log, Registerer: prometheus.DefaultRegisterer,
		Group: pf.GroupOpts(prometheus.DefaultRegisterer),
		Started: func(p *group.Processor) {
			ready.Add(p.Ready)
			if started != nil {
				started(p)
			}
		},
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ServeMetrics(gctx, pf.MetricsAddr, log, &ready) })
	g.Go(func() error { return RunAll(gctx, env, b.Modules...) })
	err = g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	if err != nil {
		return err
	}
	log.Info(b.Name + " stopped")
	return nil
}
