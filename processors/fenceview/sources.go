package fenceview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/cluster"
)

// DeviceSource answers the debounce state of one device. It returns nil, nil
// for a device it does not know.
type DeviceSource interface {
	Device(id string) (*geofencepb.DeviceState, error)
}

// OccupancySource answers the occupancy of fences. Fence returns nil, nil for
// a fence without occupancy; Each visits every occupancy record until fn
// returns false. Returned messages are read-only.
type OccupancySource interface {
	Fence(id string) (*geofencepb.Occupancy, error)
	Each(fn func(*geofencepb.Occupancy) bool) error
}

// FenceSource gives the current fence catalogue; *fences.Catalogue satisfies it.
type FenceSource interface {
	Snapshot() *fences.Snapshot
}

// Readiness says whether the sources hold a complete copy of their data,
// with the reason when they do not.
type Readiness interface {
	Ready() (bool, string)
}

// LagSource is optionally implemented by an OccupancySource that knows how
// many records its copy of a table partition is behind.
type LagSource interface {
	Lag(table string, partition int32) (records int64, ok bool)
}

// ErrNotReady is wrapped by source errors that mean "no complete copy yet";
// the API answers them with 503 like an unready Readiness.
var ErrNotReady = errors.New("not ready")

// ReadyFunc adapts a function to Readiness.
type ReadyFunc func() (bool, string)

// Ready implements Readiness.
func (f ReadyFunc) Ready() (bool, string) { return f() }

// AllReady is ready when every part is; the reason names every part that is not.
func AllReady(parts ...Readiness) Readiness {
	return ReadyFunc(func() (bool, string) {
		var reasons []string
		for _, p := range parts {
			if p == nil {
				continue
			}
			if ok, why := p.Ready(); !ok {
				reasons = append(reasons, why)
			}
		}
		if len(reasons) > 0 {
			return false, strings.Join(reasons, "; ")
		}
		return true, ""
	})
}

// ChanReady is ready once ch is closed (e.g. fences.Follower.Ready()); reason
// is reported until then. A nil channel is always ready.
func ChanReady(ch <-chan struct{}, reason string) Readiness {
	return ReadyFunc(func() (bool, string) {
		if ch == nil {
			return true, ""
		}
		select {
		case <-ch:
			return true, ""
		default:
			return false, reason
		}
	})
}

// DeviceView and OccupancyView are the typed Goka views fenceview reads.
type (
	DeviceView    = view.View[geofencepb.DeviceState, *geofencepb.DeviceState]
	OccupancyView = view.View[geofencepb.Occupancy, *geofencepb.Occupancy]
)

// ViewSources adapts Goka views of the debouncer and occupancy tables to
// DeviceSource, OccupancySource, LagSource and Readiness. The views hash
// keys with the pinned murmur2 partitioner (view.New), so Get finds keys
// written by any Java-compatible producer.
//
// Goka closes a view's partitions without synchronisation when its Run
// returns, so every read goes through ViewSources: once Run's context ends,
// reads answer ErrNotReady before the views are closed, never racing the
// close. Read the views through the exported fields only before Run or while
// it runs with a context that outlives the read.
type ViewSources struct {
	Devices   *DeviceView
	Occupancy *OccupancyView
	// FencesReady is closed when the fence catalogue has loaded (e.g.
	// fences.Follower.Ready()); nil means the catalogue needs no loading.
	FencesReady <-chan struct{}
	// Registerer is where Run reports the views' recovery and lag (nil: the
	// default registry).
	Registerer prometheus.Registerer
	// MaxStaleness is how old the views' data may be before Ready is false
	// (default DefaultMaxStaleness; see DataAge).
	MaxStaleness time.Duration

	// Set by shard (a sharded replica): the tables as a whole, this
	// replica's partitions read from the views, the others from peers.
	devices   table[geofencepb.DeviceState, *geofencepb.DeviceState]
	occupancy table[geofencepb.Occupancy, *geofencepb.Occupancy]

	mu     sync.RWMutex
	closed bool
}

// shard makes reads of keys on partitions the views do not hold go to the
// peers that do.
func (v *ViewSources) shard(r *router) {
	v.devices = shardedTable[geofencepb.DeviceState, *geofencepb.DeviceState]{v.Devices, r}
	v.occupancy = shardedTable[geofencepb.Occupancy, *geofencepb.Occupancy]{v.Occupancy, r}
}

func (v *ViewSources) deviceTable() table[geofencepb.DeviceState, *geofencepb.DeviceState] {
	if v.devices != nil {
		return v.devices
	}
	return v.Devices
}

func (v *ViewSources) occupancyTable() table[geofencepb.Occupancy, *geofencepb.Occupancy] {
	if v.occupancy != nil {
		return v.occupancy
	}
	return v.Occupancy
}

// ErrStopped is wrapped by reads after Run's context has ended.
var ErrStopped = fmt.Errorf("%w: views are shutting down", ErrNotReady)

// NewViewSources builds views of geofence.TopicDebouncer and
// geofence.TopicOccupancy. fencesReady is as ViewSources.FencesReady; opts
// go to both views (e.g. view.Tester).
func NewViewSources(cl cluster.Config, fencesReady <-chan struct{}, opts ...view.Opt) (*ViewSources, error) {
	dv, err := view.New[geofencepb.DeviceState](cl, geofence.TopicDebouncer, opts...)
	if err != nil {
		return nil, err
	}
	ov, err := view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy, opts...)
	if err != nil {
		return nil, err
	}
	return &ViewSources{Devices: dv, Occupancy: ov, FencesReady: fencesReady}, nil
}

// Run keeps both views up to date until ctx ends or a view fails, and
// reports their recovery and lag as Prometheus metrics meanwhile. When ctx
// ends it first stops reads (they answer ErrStopped), then closes the views.
func (v *ViewSources) Run(ctx context.Context) error {
	for _, t := range []struct {
		table string
		view  viewStatser
	}{{v.Devices.Topic(), guardedStats{v, v.Devices}}, {v.Occupancy.Topic(), guardedStats{v, v.Occupancy}}} {
		unregister, err := registerViewStats(v.Registerer, t.table, t.view)
		if err != nil {
			return err
		}
		defer unregister()
	}
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, gctx := errgroup.WithContext(inner)
	g.Go(func() error { return v.Devices.Run(gctx) })
	g.Go(func() error { return v.Occupancy.Run(gctx) })
	select {
	case <-ctx.Done():
	case <-gctx.Done(): // a view failed
	}
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	cancel()
	return g.Wait()
}

// guard runs fn unless the views are closing.
func (v *ViewSources) guard(fn func() error) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return ErrStopped
	}
	return fn()
}

// Ready is true once both views have recovered and the catalogue has loaded.
func (v *ViewSources) Ready() (ok bool, why string) {
	if err := v.guard(func() error {
		ok, why = AllReady(
			ReadyFunc(func() (bool, string) {
				return v.Devices.Recovered(), "view of " + v.Devices.Topic() + " is recovering"
			}),
			ReadyFunc(func() (bool, string) {
				return v.Occupancy.Recovered(), "view of " + v.Occupancy.Topic() + " is recovering"
			}),
			ReadyFunc(func() (bool, string) {
				return v.Devices.Connected() && v.Occupancy.Connected(), "views are reconnecting to the brokers"
			}),
			ChanReady(v.FencesReady, "fence catalogue is loading"),
			ReadyFunc(v.staleness),
		).Ready()
		return nil
	}); err != nil {
		return false, "views are shutting down"
	}
	return ok, why
}

// Device implements DeviceSource.
func (v *ViewSources) Device(id string) (st *geofencepb.DeviceState, err error) {
	gerr := v.guard(func() error {
		st, err = wrapNotReady(v.deviceTable().Get(id))
		return nil
	})
	if gerr != nil {
		return nil, gerr
	}
	return st, err
}

// Fence implements OccupancySource.
func (v *ViewSources) Fence(id string) (o *geofencepb.Occupancy, err error) {
	gerr := v.guard(func() error {
		o, err = wrapNotReady(occupancy.Total(v.occupancyTable().Get, id, DefaultDeviceListCap))
		return nil
	})
	if gerr != nil {
		return nil, gerr
	}
	return o, err
}

// Each implements OccupancySource. A split fence (records written before
// occupancy-members; none are written now) is visited once, as the sum of
// its salted parts (occupancy.Total), after the others.
func (v *ViewSources) Each(fn func(*geofencepb.Occupancy) bool) error {
	return v.guard(func() error {
		var split []string
		more := true
		occ := v.occupancyTable()
		err := occ.Each(func(key string, o *geofencepb.Occupancy) bool {
			switch {
			case occupancy.IsPart(key, o):
				return true
			case o.GetSaltBuckets() > 0:
				split = append(split, key) // read after the iteration, which holds the view
				return true
			case o.GetFenceId() == "":
				o.FenceId = key
			}
			more = fn(o)
			return more
		})
		for _, id := range split {
			if err != nil || !more {
				break
			}
			var o *geofencepb.Occupancy
			if o, err = occupancy.Total(occ.Get, id, DefaultDeviceListCap); o != nil {
				more = fn(o)
			}
		}
		_, err = wrapNotReady[geofencepb.Occupancy](nil, err)
		return err
	})
}

// Lag implements LagSource for the two tables.
func (v *ViewSources) Lag(table string, partition int32) (lag int64, ok bool) {
	var st viewStatser
	switch table {
	case v.Devices.Topic():
		st = guardedStats{v, v.Devices}
	case v.Occupancy.Topic():
		st = guardedStats{v, v.Occupancy}
	default:
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	stats := st.Stats(ctx)
	if stats == nil {
		return 0, false
	}
	ts, ok := stats.Partitions[partition]
	if !ok {
		return 0, false
	}
	return partitionLag(ts)
}

// guardedStats reads a view's statistics only while it is not closing.
type guardedStats struct {
	v    *ViewSources
	view viewStatser
}

func (g guardedStats) Recovered() (ok bool) {
	_ = g.v.guard(func() error { ok = g.view.Recovered(); return nil })
	return ok
}

func (g guardedStats) Stats(ctx context.Context) (st *goka.ViewStats) {
	_ = g.v.guard(func() error { st = g.view.Stats(ctx); return nil })
	return st
}

func wrapNotReady[M any](m *M, err error) (*M, error) {
	if errors.Is(err, view.ErrNotRecovered) {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return m, err
}
