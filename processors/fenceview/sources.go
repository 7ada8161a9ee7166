package fenceview

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
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
	DeviceView    = group.View[geofencepb.DeviceState, *geofencepb.DeviceState]
	OccupancyView = group.View[geofencepb.Occupancy, *geofencepb.Occupancy]
)

// ViewSources adapts Goka views of the debouncer and occupancy tables to
// DeviceSource, OccupancySource, LagSource and Readiness. The views hash
// keys with the pinned murmur2 partitioner (group.NewView), so Get finds keys
// written by any Java-compatible producer.
type ViewSources struct {
	Devices   *DeviceView
	Occupancy *OccupancyView
	// FencesReady is closed when the fence catalogue has loaded (e.g.
	// fences.Follower.Ready()); nil means the catalogue needs no loading.
	FencesReady <-chan struct{}
}

// NewViewSources builds views of topology.TopicDebouncer and
// topology.TopicOccupancy. fencesReady is as ViewSources.FencesReady; opts
// go to both views (e.g. group.ViewTester).
func NewViewSources(cl cluster.Config, fencesReady <-chan struct{}, opts ...group.ViewOpt) (*ViewSources, error) {
	dv, err := group.NewView[geofencepb.DeviceState](cl, topology.TopicDebouncer, opts...)
	if err != nil {
		return nil, err
	}
	ov, err := group.NewView[geofencepb.Occupancy](cl, topology.TopicOccupancy, opts...)
	if err != nil {
		return nil, err
	}
	return &ViewSources{Devices: dv, Occupancy: ov, FencesReady: fencesReady}, nil
}

// Run keeps both views up to date until ctx ends, and reports their
// recovery and lag as Prometheus metrics meanwhile.
func (v *ViewSources) Run(ctx context.Context) error {
	defer registerViewStats(v.Devices.Topic(), v.Devices)()
	defer registerViewStats(v.Occupancy.Topic(), v.Occupancy)()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return v.Devices.Run(ctx) })
	g.Go(func() error { return v.Occupancy.Run(ctx) })
	return g.Wait()
}

// Ready is true once both views have recovered and the catalogue has loaded.
func (v *ViewSources) Ready() (bool, string) {
	return AllReady(
		ReadyFunc(func() (bool, string) {
			return v.Devices.Recovered(), "view of " + v.Devices.Topic() + " is recovering"
		}),
		ReadyFunc(func() (bool, string) {
			return v.Occupancy.Recovered(), "view of " + v.Occupancy.Topic() + " is recovering"
		}),
		ChanReady(v.FencesReady, "fence catalogue is loading"),
	).Ready()
}

// Device implements DeviceSource.
func (v *ViewSources) Device(id string) (*geofencepb.DeviceState, error) {
	return wrapNotReady(v.Devices.Get(id))
}

// Fence implements OccupancySource.
func (v *ViewSources) Fence(id string) (*geofencepb.Occupancy, error) {
	return wrapNotReady(v.Occupancy.Get(id))
}

// Each implements OccupancySource.
func (v *ViewSources) Each(fn func(*geofencepb.Occupancy) bool) error {
	err := v.Occupancy.Each(func(key string, o *geofencepb.Occupancy) bool {
		if o.GetFenceId() == "" {
			o.FenceId = key
		}
		return fn(o)
	})
	_, err = wrapNotReady[geofencepb.Occupancy](nil, err)
	return err
}

// Lag implements LagSource for the two tables.
func (v *ViewSources) Lag(table string, partition int32) (int64, bool) {
	var st viewStatser
	switch table {
	case v.Devices.Topic():
		st = v.Devices
	case v.Occupancy.Topic():
		st = v.Occupancy
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

func wrapNotReady[M any](m *M, err error) (*M, error) {
	if errors.Is(err, group.ErrNotRecovered) {
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return m, err
}
