package visits

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// RunConfig is what Run needs besides the cluster.
type RunConfig struct {
	Topology *topology.Topology
	StateDir string
	// TimerEvery is how often due timers are looked for (0: 5s). Windows
	// close and devices expire up to this late.
	TimerEvery time.Duration
	Log        *slog.Logger
	// Opts are added to both processors' options (tests: a clock).
	Opts []group.Opt
	// Started, if set, is called with both processors once they are ready.
	Started func(visits, stats *group.Processor)
}

// Run builds both processors (checking the topology against the broker) and
// runs them until ctx ends. A clean stop returns nil.
func Run(ctx context.Context, cl cluster.Config, rc RunConfig) error {
	if rc.Log == nil {
		rc.Log = slog.Default()
	}
	if rc.Topology == nil {
		rc.Topology = geofence.Topology()
	}
	if rc.TimerEvery <= 0 {
		rc.TimerEvery = 5 * time.Second
	}
	gs := New(rc.Topology, rc.Log)
	opts := append([]group.Opt{group.StateDir(rc.StateDir), group.TimerInterval(rc.TimerEvery)}, rc.Opts...)
	vp, err := gs.Visits.Processor(ctx, cl, opts...)
	if err != nil {
		return fmt.Errorf("visits: %w", err)
	}
	sp, err := gs.Stats.Processor(ctx, cl, opts...)
	if err != nil {
		return fmt.Errorf("visits: %w", err)
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return vp.Run(ctx) })
	eg.Go(func() error { return sp.Run(ctx) })
	eg.Go(func() error {
		if vp.WaitForReadyContext(ctx) != nil || sp.WaitForReadyContext(ctx) != nil {
			return nil // ctx ended or a processor failed; its goroutine reports that
		}
		rc.Log.Info("visits ready")
		if rc.Started != nil {
			rc.Started(vp, sp)
		}
		return nil
	})
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("visits: %w", err)
	}
	return nil
}
