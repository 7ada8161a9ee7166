package fenceview_test

import (
	"sync"
	"sync/atomic"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// fakeDevices is a DeviceSource over a map.
type fakeDevices struct {
	mu  sync.Mutex
	m   map[string]*geofencepb.DeviceState
	err error
}

func (f *fakeDevices) Device(id string) (*geofencepb.DeviceState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.m[id], nil
}

func (f *fakeDevices) put(st *geofencepb.DeviceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*geofencepb.DeviceState{}
	}
	f.m[st.GetDeviceId()] = st
}

// fakeOccupancy is an OccupancySource (and LagSource) over a map.
type fakeOccupancy struct {
	mu  sync.Mutex
	m   map[string]*geofencepb.Occupancy
	err error
	lag map[int32]int64
}

func (f *fakeOccupancy) Fence(id string) (*geofencepb.Occupancy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.m[id], nil
}

func (f *fakeOccupancy) Each(fn func(*geofencepb.Occupancy) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for _, o := range f.m {
		if !fn(o) {
			return nil
		}
	}
	return nil
}

func (f *fakeOccupancy) Lag(table string, partition int32) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.lag[partition]
	return l, ok
}

func (f *fakeOccupancy) put(o *geofencepb.Occupancy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*geofencepb.Occupancy{}
	}
	f.m[o.GetFenceId()] = o
}

// fakeReady is a switchable Readiness.
type fakeReady struct {
	notReady atomic.Bool
	reason   string
}

func (f *fakeReady) Ready() (bool, string) {
	if f.notReady.Load() {
		return false, f.reason
	}
	return true, ""
}
