package occupancy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

const itPartitions = 12

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, d, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running is an occupancy processor running against the broker.
type running struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
}

func startOccupancy(t *testing.T, cl cluster.Config, topo *topology.Topology, stateDir string, opts ...occupancy.Opt) *running {
	t.Helper()
	g, err := occupancy.New(topo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := occupancy.Processor(ctx, g, cl, group.StateDir(stateDir))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &running{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- proc.Run(ctx) }()
	t.Cleanup(r.stop)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := proc.WaitForReadyContext(wctx); err != nil {
		t.Fatalf("occupancy not ready: %v", err)
	}
	return r
}

// stop stops the processor and reports a failed run; it is idempotent.
func (r *running) stop() {
	if r.done == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			r.t.Errorf("occupancy processor: %v", err)
		}
	case <-time.After(30 * time.Second):
		r.t.Errorf("occupancy processor did not stop within 30s")
	}
	r.done = nil
}

func produce(t *testing.T, prod *kgo.Client, trigs []*geofencepb.Trigger) {
	t.Helper()
	codec := codecs.For[geofencepb.Trigger]()
	recs := make([]*kgo.Record, 0, len(trigs))
	for _, tr := range trigs {
		v, err := codec.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(tr.DeviceId), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if want := topology.PartitionFor(string(r.Key), itPartitions); r.Partition != want {
			t.Fatalf("franz-go put %s on %d, PartitionFor says %d", r.Key, r.Partition, want)
		}
	}
}

// snapshot reads every fence of sc through the view; absent fences are nil.
func snapshot(v *group.View[geofencepb.Occupancy, *geofencepb.Occupancy], sc *scenario) (map[string]*geofencepb.Occupancy, error) {
	out := map[string]*geofencepb.Occupancy{}
	for _, f := range sc.fences {
		occ, err := v.Get(f)
		if err != nil {
			return nil, err
		}
		out[f] = occ
	}
	return out, nil
}

// matches reports whether the view shows the ground truth and at least
// minDrops dropped deliveries.
func matches(sc *scenario, occs map[string]*geofencepb.Occupancy, minDrops uint64) (bool, string) {
	var drops uint64
	for _, occ := range occs {
		drops += occ.GetDuplicatesDropped() + occ.GetStaleDropped()
	}
	for f, want := range sc.truth() {
		occ := occs[f]
		if occ.GetCount() != int64(len(want)) {
			return false, fmt.Sprintf("fence %s count %d, truth %d", f, occ.GetCount(), len(want))
		}
		for _, d := range want {
			if !occupancy.Inside(occ, d) {
				return false, fmt.Sprintf("fence %s: %s not inside", f, d)
			}
		}
	}
	if drops < minDrops {
		return false, fmt.Sprintf("%d deliveries dropped, want ≥ %d", drops, minDrops)
	}
	return true, ""
}

func dropped(occs map[string]*geofencepb.Occupancy) uint64 {
	var n uint64
	for _, occ := range occs {
		n += occ.GetDuplicatesDropped() + occ.GetStaleDropped()
	}
	return n
}

// TestOccupancyOnEmbeddedBroker: triggers written by a foreign (franz-go,
// murmur2) producer for dozens of devices and fences, with duplicates, replays
// and per-(device, fence)-only order, some before the group first starts; the
// occupancy read through a pinned-hasher view equals the ground truth. Then
// the processor restarts on the same state and re-delivered triggers change
// nothing but the drop counters.
func TestOccupancyOnEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology(geofence.WithPartitions(itPartitions))
	adm := kadm.NewClient(embeddedtest.Client(t, cl))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	sc := genScenario(r, "", 48, 10, 14)
	order := sc.withDuplicatesAndReplays(r, sc.pairOrder(r))
	extras := uint64(len(order) - len(sc.all))
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicTriggers))

	// Rule 12: records written before the group first joins are not skipped.
	half := len(order) / 2
	produce(t, prod, order[:half])
	stateDir := t.TempDir()
	proc := startOccupancy(t, cl, topo, stateDir)
	produce(t, prod, order[half:])

	view, err := group.NewView[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, view)

	lagCtx, lagCancel := context.WithCancel(context.Background())
	lagDone := make(chan error, 1)
	go func() { lagDone <- occupancy.RunLagReporter(lagCtx, cl, 100*time.Millisecond, nil, nil) }()
	defer func() {
		lagCancel()
		if err := <-lagDone; err != nil {
			t.Errorf("lag reporter: %v", err)
		}
	}()

	settled := func(minDrops uint64) func() (bool, string) {
		return func() (bool, string) {
			rep, err := occupancy.Lag(ctx, cl)
			if err != nil {
				return false, err.Error()
			}
			if rep.Total != 0 {
				return false, rep.String()
			}
			occs, err := snapshot(view, sc)
			if err != nil {
				return false, err.Error()
			}
			return matches(sc, occs, minDrops)
		}
	}
	waitFor(t, 30*time.Second, "occupancy equals ground truth", settled(extras))
	before, err := snapshot(view, sc)
	if err != nil {
		t.Fatal(err)
	}
	for f, occ := range before {
		if occ != nil {
			checkInvariants(t, occ, occupancy.DefaultDevicesCap)
		} else if len(sc.truth()[f]) > 0 {
			t.Fatalf("fence %s missing from the view", f)
		}
	}

	// The lag report covers both inputs, every partition.
	rep, err := occupancy.Lag(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	var ends int64
	for _, p := range rep.Partitions {
		if p.Topic == geofence.TopicTriggers {
			ends += p.End
		}
	}
	if len(rep.Partitions) != 2*itPartitions || ends != int64(len(order)) || rep.Total != 0 {
		t.Fatalf("lag report %d partitions, %d trigger records (want %d): %s", len(rep.Partitions), ends, len(order), rep)
	}
	waitFor(t, 10*time.Second, "lag gauges exported", func() (bool, string) {
		n, total := lagGauges(t)
		return n == 2*itPartitions && total == 0, fmt.Sprintf("%d series, total %v", n, total)
	})

	// The loop topic is keyed by fence and partitioned like Java would.
	loopPartitions(t, cl, len(order))

	// Restart on the same state and re-deliver a replay of some devices.
	proc.stop()
	proc = startOccupancy(t, cl, topo, stateDir)
	var replay []*geofencepb.Trigger
	for i, dev := range sc.devices {
		if i%3 == 0 {
			trigs := sc.byDevice[dev]
			replay = append(replay, trigs[:1+r.IntN(len(trigs))]...)
		}
	}
	produce(t, prod, replay)
	want := dropped(before) + uint64(len(replay))
	waitFor(t, 30*time.Second, "replay processed after restart", func() (bool, string) {
		ok, state := settled(want)()
		if !ok {
			return false, state
		}
		occs, _ := snapshot(view, sc)
		if got := dropped(occs); got != want {
			return false, fmt.Sprintf("dropped %d, want exactly %d", got, want)
		}
		return true, ""
	})
	after, err := snapshot(view, sc)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range before {
		a := after[f]
		if b == nil {
			if a != nil {
				t.Fatalf("fence %s appeared after the replay", f)
			}
			continue
		}
		b, a = proto.Clone(b).(*geofencepb.Occupancy), proto.Clone(a).(*geofencepb.Occupancy)
		b.DuplicatesDropped, b.StaleDropped, a.DuplicatesDropped, a.StaleDropped = 0, 0, 0, 0
		if !proto.Equal(a, b) {
			t.Fatalf("fence %s changed by a replay:\nbefore %v\nafter  %v", f, b, a)
		}
	}
}

// loopPartitions reads occupancy-loop and checks every record is keyed by its
// fence and sits on the partition the pinned partitioner names.
func loopPartitions(t *testing.T, cl cluster.Config, want int) {
	t.Helper()
	c := embeddedtest.Client(t, cl, kgo.ConsumeTopics(geofence.TopicOccupancyLoop), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	codec := codecs.For[geofencepb.Trigger]()
	n := 0
	for n < want {
		f := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d loop records", n, want)
		}
		for _, r := range f.Records() {
			n++
			tr, err := codec.Unmarshal(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Key) != tr.FenceId {
				t.Fatalf("loop record keyed %q for fence %q", r.Key, tr.FenceId)
			}
			if p := topology.PartitionFor(tr.FenceId, itPartitions); r.Partition != p {
				t.Fatalf("fence %s looped to partition %d, murmur2 says %d", tr.FenceId, r.Partition, p)
			}
		}
	}
}

// lagGauges returns the number of fencestream_occupancy_lag_records series and
// their sum.
func lagGauges(t *testing.T) (int, float64) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fencestream_occupancy_lag_records" {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue()
		}
		return len(mf.GetMetric()), sum
	}
	return 0, 0
}
