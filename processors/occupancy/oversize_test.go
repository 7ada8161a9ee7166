package occupancy_test

import (
	"context"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestOversizedTriggersMoveOn (issue 31): between a device's ENTER and EXIT
// on fence-triggers, a trigger whose key has 1 MiB and 1 MiB of garbage
// (each fits a real broker's limit, neither fits whole in a dead letter).
// occupancy-members moves past them: the EXIT is applied and committed, the
// fence's count is back to 0, the oversized ones are dead-lettered cut down
// with their sizes and counted once, nothing restarts, and the log stays
// small. On main occupancy-members restarted every few seconds without end.
func TestOversizedTriggersMoveOn(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology(geofence.Partitions(itPartitions))
	reg := prometheus.NewRegistry()
	logs := &embeddedtest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gs, err := occupancy.New(topo, occupancy.Registerer(reg), occupancy.Logger(log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	procs, err := gs.Processors(ctx, cl, group.StateDir(t.TempDir()), group.Registerer(reg), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, len(procs))
	for _, p := range procs {
		go func() { done <- p.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range procs {
			if err := <-done; err != nil {
				t.Errorf("occupancy: %v", err)
			}
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	for _, p := range procs {
		if err := p.WaitForReadyContext(wctx); err != nil {
			t.Fatalf("occupancy not ready: %v", err)
		}
	}

	const dev, fence = "dev-1", "zone-1"
	codec := codecs.For[geofencepb.Trigger]()
	value := func(tr *geofencepb.Trigger) []byte {
		v, err := codec.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicTriggers))
	send := func(tr *geofencepb.Trigger) *kgo.Record {
		t.Helper()
		r := &kgo.Record{Key: []byte(dev), Value: value(tr)}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	send(trig(dev, fence, enter, 10))
	big := grouptest.ProduceOversized(t, cl, geofence.TopicTriggers, dev, itPartitions, value(trig(dev, fence, exit, 15)))
	last := send(trig(dev, fence, exit, 20))

	deadline := time.Now().Add(2 * time.Minute)
	for grouptest.Committed(t, cl, geofence.GroupOccupancyMembers, geofence.TopicTriggers, last.Partition) <= last.Offset {
		if time.Now().After(deadline) {
			t.Fatalf("occupancy-members did not commit past the trigger after the oversized ones (offset %d); restarts: %v",
				last.Offset, grouptest.Counter(t, reg, "fencestream_processor_restarts_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	grouptest.CheckCutDown(t, cl, geofence.TopicTriggers, big)
	for _, reason := range []string{deadletter.ReasonBadKey, deadletter.ReasonUndecodable} {
		if n := grouptest.Counter(t, reg, "fencestream_deadletters_total", "group", geofence.GroupOccupancyMembers, "reason", reason); n != 1 {
			t.Errorf("fencestream_deadletters_total{reason=%q} = %v, want 1", reason, n)
		}
	}
	if n := grouptest.Counter(t, reg, "fencestream_processor_restarts_total"); n != 0 {
		t.Errorf("occupancy restarted %v times", n)
	}
	// The ENTER and the EXIT both reached the fence's count.
	tv, err := view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, tv)
	waitFor(t, time.Minute, "the fence's count after the EXIT", func() (bool, string) {
		occ, err := tv.Get(fence)
		return err == nil && occ != nil && occ.GetExitsTotal() == 1 && occ.GetCount() == 0, occ.String()
	})
	grouptest.CheckLogBounded(t, logs.String())
}
