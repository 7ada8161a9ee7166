package fenceview_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
)

func TestViewSourcesReadinessAndReads(t *testing.T) {
	tt := tester.New(t)
	fencesLoaded := make(chan struct{})
	vs, err := fenceview.NewViewSources(cluster.Config{}, fencesLoaded, view.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	ok, why := vs.Ready()
	if ok || !strings.Contains(why, "debouncer-table") || !strings.Contains(why, "occupancy-table") || !strings.Contains(why, "fence catalogue") {
		t.Fatalf("before start: ready %v, reason %q", ok, why)
	}
	if _, err := vs.Device("d1"); !errors.Is(err, fenceview.ErrNotReady) {
		t.Fatalf("read before recovery: %v, want ErrNotReady", err)
	}
	if err := vs.Each(func(*geofencepb.Occupancy) bool { return true }); !errors.Is(err, fenceview.ErrNotReady) {
		t.Fatalf("Each before recovery: %v, want ErrNotReady", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- vs.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := vs.Devices.WaitRecovered(wctx); err != nil {
		t.Fatal(err)
	}
	if err := vs.Occupancy.WaitRecovered(wctx); err != nil {
		t.Fatal(err)
	}
	if ok, why := vs.Ready(); ok || why != "fence catalogue is loading" {
		t.Fatalf("views recovered, catalogue loading: ready %v, reason %q", ok, why)
	}
	close(fencesLoaded)
	if ok, why := vs.Ready(); !ok {
		t.Fatalf("all loaded: not ready: %s", why)
	}

	tt.SetTableValue(goka.Table(geofence.TopicDebouncer), "d1", &geofencepb.DeviceState{DeviceId: "d1", Pings: 3})
	tt.SetTableValue(goka.Table(geofence.TopicOccupancy), "f1", &geofencepb.Occupancy{Count: 2}) // fence_id left empty: the key fills it
	if st, err := vs.Device("d1"); err != nil || st.GetPings() != 3 {
		t.Fatalf("Device(d1) = %v, %v", st, err)
	}
	if st, err := vs.Device("nobody"); err != nil || st != nil {
		t.Fatalf("Device(nobody) = %v, %v; want nil, nil", st, err)
	}
	if o, err := vs.Fence("f1"); err != nil || o.GetCount() != 2 {
		t.Fatalf("Fence(f1) = %v, %v", o, err)
	}
	var seen []string
	if err := vs.Each(func(o *geofencepb.Occupancy) bool { seen = append(seen, o.GetFenceId()); return true }); err != nil || strings.Join(seen, ",") != "f1" {
		t.Fatalf("Each: %v, %v", seen, err)
	}
	if _, ok := vs.Lag("no-such-table", 0); ok {
		t.Fatal("lag of an unknown table")
	}
}

func TestReadinessHelpers(t *testing.T) {
	ch := make(chan struct{})
	r := fenceview.AllReady(fenceview.ChanReady(ch, "a"), fenceview.ChanReady(nil, "never"), fenceview.ReadyFunc(func() (bool, string) { return false, "b" }), nil)
	if ok, why := r.Ready(); ok || why != "a; b" {
		t.Fatalf("ready %v %q", ok, why)
	}
	close(ch)
	if ok, why := r.Ready(); ok || why != "b" {
		t.Fatalf("ready %v %q", ok, why)
	}
}
