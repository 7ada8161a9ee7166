package fenceview_test

import (
	"slices"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
)

// A fence the occupancy processor split into salted parts reads as one fence,
// its parts summed, both by id and when listing.
func TestViewSourcesSumSplitFences(t *testing.T) {
	tt := tester.New(t)
	vs, err := fenceview.NewViewSources(cluster.Config{}, nil, view.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, vs.Devices) // Goka's tester waits for every view it built
	grouptest.RunView(t, vs.Occupancy)
	in := &geofencepb.Member{Inside: true}
	table := goka.Table(geofence.TopicOccupancy)
	tt.SetTableValue(table, "big", &geofencepb.Occupancy{FenceId: "big", Count: 1, SaltBuckets: 32, EntersTotal: 2, ExitsTotal: 1,
		Members: map[string]*geofencepb.Member{"a": in, "z": {}}})
	tt.SetTableValue(table, "big#3", &geofencepb.Occupancy{FenceId: "big", Count: 2, EntersTotal: 2, Members: map[string]*geofencepb.Member{"c": in, "b": in}})
	tt.SetTableValue(table, "big#7", &geofencepb.Occupancy{FenceId: "big", Count: 1, EntersTotal: 1, Members: map[string]*geofencepb.Member{"d": in}})
	tt.SetTableValue(table, "small", &geofencepb.Occupancy{FenceId: "small", Count: 5})
	o, err := vs.Fence("big")
	if err != nil || o.GetCount() != 4 || o.GetEntersTotal() != 5 || !slices.Equal(o.GetDevices(), []string{"a", "b", "c", "d"}) {
		t.Fatalf("Fence(big) = %v, %v", o, err)
	}
	got := map[string][]int64{}
	if err := vs.Each(func(o *geofencepb.Occupancy) bool {
		got[o.GetFenceId()] = append(got[o.GetFenceId()], o.GetCount())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got["big"], []int64{4}) || !slices.Equal(got["small"], []int64{5}) {
		t.Fatalf("Each: %v", got)
	}
}
