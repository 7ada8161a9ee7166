package debounce

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
	// SweepEvery is how often the processor looks for due timers (device
	// silence timeouts), so how late a TIMEOUT exit may fire (0: 30s).
	SweepEvery time.Duration
	// MaxClockSkew is how far ahead of the wall clock a ping's HLC may be
	// (0: group.DefaultMaxSkew).
	MaxClockSkew time.Duration
	Defaults     Settings
	// MaxAccuracyM is the largest accuracy a ping may state (0:
	// DefaultMaxAccuracyM); vaguer pings are dead-lettered as implausible.
	MaxAccuracyM float64
	Log          *slog.Logger
	// Started, if set, is called with the processor once it is ready.
	Started func(*group.Processor)
	// Catalogue, if set, is a catalogue the caller keeps in step with the
	// fences topic (shared with other components of the process);
	// CatalogueReady is closed once it has caught up. Default: Run follows the
	// topic itself.
	Catalogue      *fences.Catalogue
	CatalogueReady <-chan struct{}
}

// Run follows the fence catalogue, waits until it has caught up (a debouncer
// with a half-loaded catalogue would close every stay with FENCE_DELETED), then
// runs the processor (whose timers close silent devices) until ctx ends.
func Run(ctx context.Context, cl cluster.Config, rc RunConfig) error {
	log := rc.Log
	if log == nil {
		log = slog.Default()
	}
	if rc.SweepEvery <= 0 {
		rc.SweepEvery = 30 * time.Second
	}
	cat, ready := rc.Catalogue, rc.CatalogueReady
	var follower *fences.Follower
	if cat == nil {
		cat = fences.New()
		follower = fences.NewFollower(cl, geofence.TopicFences, cat, log)
		ready = follower.Ready()
	}
	if ready == nil {
		closed := make(chan struct{})
		close(closed)
		ready = closed
	}
	if rc.MaxAccuracyM == 0 {
		rc.MaxAccuracyM = DefaultMaxAccuracyM
	}
	d, err := New(rc.Topology, cat, WithDefaults(rc.Defaults), WithLogger(log), WithMaxAccuracy(rc.MaxAccuracyM))
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	// Topics must exist before the follower reads the fences topic.
	if rc.MaxClockSkew <= 0 {
		rc.MaxClockSkew = group.DefaultMaxSkew
	}
	proc, err := d.Group().Processor(ctx, cl, append(append(d.ProcessorOpts(), group.StateDir(rc.StateDir), group.HotStandby(rc.HotStandby), group.RecoverAhead(rc.RecoverAhead), group.MaxClockSkew(rc.MaxClockSkew), group.TimerInterval(rc.SweepEvery)), rc.Group...)...)
	if err != nil {
		return err
	}
	if follower != nil {
		g.Go(func() error { return follower.Run(ctx) })
	}
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
		}
		log.Info("fence catalogue loaded", "fences", cat.Snapshot().Len(), "version", cat.Snapshot().Version())
		return proc.Run(ctx)
	})
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-ready:
		}
		if err := proc.WaitForReadyContext(ctx); err != nil {
			return nil // ctx ended or the processor failed; its own goroutine reports that
		}
		log.Info("debouncer ready")
		if rc.Started != nil {
			rc.Started(proc)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("debouncer: %w", err)
	}
	return nil
}
