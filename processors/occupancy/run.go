package occupancy

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
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
	// DevicesCap bounds the devices listed per record (0: DefaultDevicesCap).
	DevicesCap int
	// Horizon is how long a record remembers a device that left (0:
	// DefaultHorizon); MaxMembers how many devices a record holds before it
	// is split (0: DefaultMaxMembers).
	Horizon    time.Duration
	MaxMembers int
	// LagEvery is how often the lag gauges are refreshed (0: 10s; negative: off).
	LagEvery time.Duration
	Log      *slog.Logger
	// Started, if set, is called with the processor once it is ready.
	Started func(*group.Processor)
	// Catalogue, if set, is a fence catalogue the caller keeps in step with
	// the fences topic; CatalogueReady is closed once it has caught up.
	// Default: Run follows the topic itself. Triggers for fences it has never
	// held are dead-lettered (WithCatalogue).
	Catalogue      *fences.Catalogue
	CatalogueReady <-chan struct{}
}

// Run builds the occupancy processor (checking the topology against the broker
// and claiming the state directory), then runs it and the lag reporter until
// ctx ends. A clean stop returns nil.
func Run(ctx context.Context, cl cluster.Config, rc RunConfig) error {
	log := rc.Log
	if log == nil {
		log = slog.Default()
	}
	lim := Limits{DevicesCap: rc.DevicesCap, Horizon: rc.Horizon, MaxMembers: rc.MaxMembers}.withDefaults()
	if rc.LagEvery == 0 {
		rc.LagEvery = 10 * time.Second
	}
	if rc.Topology == nil {
		rc.Topology = geofence.Topology()
	}
	cat, ready := rc.Catalogue, rc.CatalogueReady
	var follower *fences.Follower
	if cat == nil {
		cat = fences.New()
		follower = fences.NewFollower(cl, geofence.TopicFences, cat, log.With("component", "fences"))
		ready = follower.Ready()
	}
	g, err := New(rc.Topology, WithDevicesCap(lim.DevicesCap), WithHorizon(lim.Horizon), WithMaxMembers(lim.MaxMembers), WithLogger(log), WithCatalogue(cat))
	if err != nil {
		return err
	}
	proc, err := Processor(ctx, g, cl, append([]group.Opt{group.StateDir(rc.StateDir), group.HotStandby(rc.HotStandby), group.RecoverAhead(rc.RecoverAhead)}, rc.Group...)...)
	if err != nil {
		return fmt.Errorf("occupancy: %w", err)
	}
	eg, ctx := errgroup.WithContext(ctx)
	if follower != nil {
		eg.Go(func() error { return follower.Run(ctx) })
	}
	// Judging fences needs the catalogue caught up: a half-loaded one would
	// dead-letter triggers of fences it has not read yet.
	eg.Go(func() error {
		if ready != nil {
			select {
			case <-ctx.Done():
				return nil
			case <-ready:
			}
		}
		return proc.Run(ctx)
	})
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
		eg.Go(func() error { return RunLagReporter(ctx, cl, rc.LagEvery, log) })
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("occupancy: %w", err)
	}
	return nil
}
