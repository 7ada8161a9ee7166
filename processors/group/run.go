package group

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/topology/cluster"
)

// Run builds the group's processor (Group.Processor: broker check, state
// directory, pinned hasher) and runs it until ctx ends, logging when it is
// ready. A clean stop returns nil.
func (g *Group[S, PS]) Run(ctx context.Context, cl cluster.Config, opts ...Opt) error {
	proc, err := g.Processor(ctx, cl, opts...)
	if err != nil {
		return err
	}
	cfg := newConfig(atRun, opts)
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
