package occupancy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestPipelineFleetOccupancy runs the debouncer and the occupancy processor
// together on the embedded broker: a seeded fleet's pings go in through a
// franz-go (murmur2) producer, and the occupancy of every demo fence, read
// through a pinned-hasher view, equals the fleet's ground truth exactly.
func TestPipelineFleetOccupancy(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cat := fences.New()
	if err := cat.Apply(1, fences.Demo(), nil); err != nil {
		t.Fatal(err)
	}
	snap := cat.Snapshot()
	sim, err := fleet.New(fleet.Config{Seed: 7, Moving: 40, Parked: 0, NoiseSigmaM: 5,
		Interval: 2 * time.Second, Duration: 12 * time.Minute, StampHLC: true}, snap.All())
	if err != nil {
		t.Fatal(err)
	}
	truth := sim.Truth()

	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology(geofence.Partitions(itPartitions))
	adm := kadm.NewClient(embeddedtest.Client(t, cl))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}

	// The debouncer, without its wall-clock sweep (the fleet's event time is
	// not now, and every stay that matters closes by an EXIT).
	d, err := debounce.New(topo, cat, debounce.Defaults(debounce.DefaultSettings()))
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(context.Background())
	dproc, err := d.Group().Processor(dctx, cl, group.StateDir(t.TempDir()))
	if err != nil {
		dcancel()
		t.Fatal(err)
	}
	ddone := make(chan error, 1)
	go func() { ddone <- dproc.Run(dctx) }()
	t.Cleanup(func() {
		dcancel()
		if err := <-ddone; err != nil {
			t.Errorf("debouncer: %v", err)
		}
	})
	startOccupancy(t, cl, topo, t.TempDir())

	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicPings))
	codec := codecs.For[geofencepb.Ping]()
	pings := sim.Pings()
	recs := make([]*kgo.Record, 0, len(pings))
	for _, p := range pings {
		v, err := codec.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(p.DeviceId), Value: v})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	tv, err := view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, tv)

	var ids []string
	for _, f := range snap.All() {
		ids = append(ids, f.ID)
	}
	entered := 0
	for _, tr := range truth.Transitions {
		if tr.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
			entered++
		}
	}
	if entered == 0 || len(truth.FinalInside) == 0 {
		t.Fatalf("the fleet never enters a fence (%d enters, %d fences occupied at the end): the test proves nothing", entered, len(truth.FinalInside))
	}
	t.Logf("%d pings, %d true transitions (%d enters), %d fences occupied at the end", len(pings), len(truth.Transitions), entered, len(truth.FinalInside))
	waitFor(t, 45*time.Second, "fleet occupancy equals ground truth", func() (bool, string) {
		rep, err := occupancy.Lag(ctx, cl)
		if err != nil || rep.Total != 0 {
			return false, fmt.Sprintf("lag %v %v", rep, err)
		}
		var enters uint64
		for _, id := range ids {
			occ, err := occupancy.Total(tv.Get, id, 0) // 40 devices fit the default list
			if err != nil {
				return false, err.Error()
			}
			want := truth.FinalInside[id]
			got := occ.GetDevices()
			if occ.GetCount() != int64(len(want)) || !slices.Equal(got, want) && len(got)+len(want) > 0 {
				return false, fmt.Sprintf("fence %s: count %d inside %v, truth %v", id, occ.GetCount(), got, want)
			}
			enters += occ.GetEntersTotal()
		}
		if enters != uint64(entered) {
			return false, fmt.Sprintf("%d enters applied, truth has %d", enters, entered)
		}
		return true, ""
	})
}
