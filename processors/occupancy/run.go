package occupancy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// RunConfig is what Run needs besides the cluster.
type RunConfig struct {
	Topology   *topology.Topology
	StateDir   string
	HotStandby bool
	// RecoverAhead recovers newly assigned partitions before the rebalance completes.
	RecoverAhead bool
	// Group are further group options (storage, producer flush).
	Group []group.Opt
	// DevicesCap bounds the devices listed per fence (0: DefaultDevicesCap).
	DevicesCap int
	// LagEvery is how often the lag gauges are refreshed (0: 10s; negative: off).
	LagEvery time.Duration
	Log      *slog.Logger
	// Started, if set, is called with the processor once it is ready.
	Started func(*group.Processor)
}

// Run builds the occupancy processor (checking the topology against the broker
// and claiming the state directory), then runs it and the lag reporter until
// ctx ends. A clean stop returns nil.
func Run(ctx context.Context, cl cluster.Config, rc RunConfig) error {
	log := rc.Log
	if log == nil {
		log = slog.Default()
	}
	if rc.DevicesCap == 0 {
		rc.DevicesCap = DefaultDevicesCap
	}
	if rc.LagEvery == 0 {
		rc.LagEvery = 10 * time.Second
	}
	if rc.Topology == nil {
		rc.Topology = topology.Geofence()
	}
	g, err := New(rc.Topology, WithDevicesCap(rc.DevicesCap), WithLogger(log))
	if err != nil {
		return err
	}
	proc, err := Processor(ctx, g, cl, append([]group.Opt{group.StateDir(rc.StateDir), group.HotStandby(rc.HotStandby), group.RecoverAhead(rc.RecoverAhead)}, rc.Group...)...)
	if err != nil {
		return fmt.Errorf("occupancy: %w", err)
	}
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return proc.Run(ctx) })
	eg.Go(func() error {
		if err := proc.WaitForReadyContext(ctx); err != nil {
			return nil // ctx ended or the processor failed; its own goroutine reports that
		}
		log.Info("occupancy ready")
		if rc.Started != nil {
			rc.Started(proc)
		}
		return nil
	})
	if rc.LagEvery > 0 {
		eg.Go(func() error { return RunLagReporter(ctx, cl, rc.LagEvery) })
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("occupancy: %w", err)
	}
	return nil
}
