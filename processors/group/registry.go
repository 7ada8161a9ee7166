package group

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Env is what a binary that hosts registered processors (the all-in-one
// runner) gives each of them.
type Env struct {
	Cluster cluster.Config
	// Topology is the binary's composed topology (topology.Compose).
	Topology *topology.Topology
	// StateDir is the binary's state root; each group keeps its tables in
	// StateDir/<group>.
	StateDir   string
	HotStandby bool
	Log        *slog.Logger
}

// Opts are the processor options the binary's settings imply.
func (e Env) Opts() []Opt {
	return []Opt{StateDir(e.StateDir), HotStandby(e.HotStandby), RecoverAhead(e.HotStandby)}
}

// Runner is a processor a hosting binary can run: Run blocks until ctx ends
// (then returns nil) or the processor fails.
type Runner struct {
	Name string
	Run  func(ctx context.Context, env Env) error
}

var runners struct {
	mu   sync.Mutex
	list []Runner
}

// RegisterRunner records r for the binaries that host registered processors.
// Call it from the init of the processor's package, next to
// topology.Register.
func RegisterRunner(r Runner) {
	runners.mu.Lock()
	defer runners.mu.Unlock()
	runners.list = append(runners.list, r)
}

// Runners lists the registered runners in registration order.
func Runners() []Runner {
	runners.mu.Lock()
	defer runners.mu.Unlock()
	return slices.Clone(runners.list)
}

// OnReady sets a function called with the processor once it is ready
// (default: none). Used by Group.Run.
func OnReady(fn func(*Processor)) Opt { return func(c *runConfig) { c.onReady = fn } }

// Run builds the group's processor (Group.Processor: broker check, state
// directory, pinned hasher) and runs it until ctx ends, logging when it is
// ready. A clean stop returns nil.
func (g *Group[S, PS]) Run(ctx context.Context, cl cluster.Config, opts ...Opt) error {
	proc, err := g.Processor(ctx, cl, opts...)
	if err != nil {
		return err
	}
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return proc.Run(ctx) })
	eg.Go(func() error {
		if err := proc.WaitForReadyContext(ctx); err != nil {
			return nil // ctx ended or the processor failed; its own goroutine reports that
		}
		g.log.Info(g.name + " ready")
		if cfg.onReady != nil {
			cfg.onReady(proc)
		}
		return nil
	})
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("%s: %w", g.name, err)
	}
	return nil
}
