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
	"github.com/fencestream/fencestream/processors/group/view"
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
	n      int // processors
}

func startOccupancy(t *testing.T, cl cluster.Config, topo *topology.Topology, stateDir string, opts ...occupancy.Opt) *running {
	t.Helper()
	gs, err := occupancy.New(topo, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	procs, err := gs.Processors(ctx, cl, group.StateDir(stateDir))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &running{t: t, cancel: cancel, done: make(chan error, len(procs)), n: len(procs)}
	for _, p := range procs {
		go func() { r.done <- p.Run(ctx) }()
	}
	t.Cleanup(r.stop)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	for _, p := range procs {
		if err := p.WaitForReadyContext(wctx); err != nil {
			t.Fatalf("occupancy not ready: %v", err)
		}
	}
	return r
}

// stop stops the processor and reports a failed run; it is idempotent.
func (r *running) stop() {
	if r.done == nil {
		return
	}
	r.cancel()
	for range r.n {
		select {
		case err := <-r.done:
			if err != nil {
				r.t.Errorf("occupancy processor: %v", err)
			}
		case <-time.After(30 * time.Second):
			r.t.Errorf("occupancy processor did not stop within 30s")
		}
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

// views reads both of occupancy's tables.
type views struct {
	counts  *view.View[geofencepb.Occupancy, *geofencepb.Occupancy]
	members *view.View[geofencepb.DeviceMembership, *geofencepb.DeviceMembership]
}

// tables is what the views show of a scenario's fences and devices; absent
// keys are nil.
type tables struct {
	fences  map[string]*geofencepb.Occupancy
	devices map[string]*geofencepb.DeviceMembership
}

func (v views) snapshot(sc *scenario) (tables, error) {
	out := tables{fences: map[string]*geofencepb.Occupancy{}, devices: map[string]*geofencepb.DeviceMembership{}}
	for _, f := range sc.fences {
		occ, err := v.counts.Get(f)
		if err != nil {
			return out, err
		}
		out.fences[f] = occ
	}
	for _, d := range sc.devices {
		m, err := v.members.Get(d)
		if err != nil {
			return out, err
		}
		out.devices[d] = m
	}
	return out, nil
}

// matches reports whether the tables show the ground truth — each fence's
// count and each device's registers — and at least minDrops dropped
// deliveries.
func matches(sc *scenario, tb tables, minDrops uint64) (bool, string) {
	for f, want := range sc.truth() {
		if got := tb.fences[f].GetCount(); got != int64(len(want)) {
			return false, fmt.Sprintf("fence %s count %d, truth %d", f, got, len(want))
		}
		for _, d := range want {
			if !occupancy.Inside(tb.devices[d], f) {
				return false, fmt.Sprintf("fence %s: %s not inside", f, d)
			}
		}
	}
	if drops := dropped(tb); drops < minDrops {
		return false, fmt.Sprintf("%d deliveries dropped, want ≥ %d", drops, minDrops)
	}
	return true, ""
}

// dropped counts the deliveries the tables dropped: triggers at the devices'
// registers, re-sent changes at the fences.
func dropped(tb tables) uint64 {
	var n uint64
	for _, m := range tb.devices {
		n += m.GetDuplicatesDropped() + m.GetStaleDropped() + m.GetExpiredDropped()
	}
	for _, occ := range tb.fences {
		n += occ.GetDuplicatesDropped()
	}
	return n
}

// checkTables fails the test when a fence's record disagrees with the
// devices' registers.
func checkTables(t *testing.T, sc *scenario, tb tables) {
	t.Helper()
	w := newWorld(occupancy.Limits{})
	for d, m := range tb.devices {
		if m != nil {
			w.devices[d] = m
		}
	}
	for f, occ := range tb.fences {
		if occ != nil {
			w.fences[f] = occ
			w.peak[f] = int64(len(sc.devices)) // the scenario's lists never fill the default cap
		}
	}
	checkInvariants(t, w)
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
	topo := geofence.Topology(geofence.Partitions(itPartitions))
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
	var err error

	var v views
	if v.counts, err = view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy); err != nil {
		t.Fatal(err)
	}
	if v.members, err = view.New[geofencepb.DeviceMembership](cl, geofence.TopicOccupancyMembers); err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, v.counts)
	grouptest.RunView(t, v.members)

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
			tb, err := v.snapshot(sc)
			if err != nil {
				return false, err.Error()
			}
			return matches(sc, tb, minDrops)
		}
	}
	waitFor(t, 30*time.Second, "occupancy equals ground truth", settled(extras))
	before, err := v.snapshot(sc)
	if err != nil {
		t.Fatal(err)
	}
	checkTables(t, sc, before)
	for f := range sc.truth() {
		if before.fences[f] == nil && len(sc.truth()[f]) > 0 {
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

	// The changes are keyed by fence and partitioned like Java would.
	changesPartitions(t, cl, adm)

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
	// Each replayed trigger is dropped once: by its device's register (the
	// handler ran again), or as a re-sent change by its fence (the kit
	// recognised the replay and re-sent what it recorded), or by neither
	// when the kit recognised it and it had sent nothing.
	waitFor(t, 30*time.Second, "replay processed after restart", func() (bool, string) {
		ok, state := settled(dropped(before) + 1)()
		if !ok {
			return false, state
		}
		tb, _ := v.snapshot(sc)
		if got, most := dropped(tb), dropped(before)+uint64(len(replay)); got > most {
			return false, fmt.Sprintf("dropped %d, more than one per replayed trigger (%d)", got, most)
		}
		return true, ""
	})
	after, err := v.snapshot(sc)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range before.fences {
		a := after.fences[f]
		if b == nil {
			if a != nil {
				t.Fatalf("fence %s appeared after the replay", f)
			}
			continue
		}
		b, a = proto.Clone(b).(*geofencepb.Occupancy), proto.Clone(a).(*geofencepb.Occupancy)
		b.DuplicatesDropped, a.DuplicatesDropped = 0, 0
		if !proto.Equal(a, b) {
			t.Fatalf("fence %s changed by a replay:\nbefore %v\nafter  %v", f, b, a)
		}
	}
	for d, b := range before.devices {
		a := after.devices[d]
		if b == nil || a == nil {
			if a != b {
				t.Fatalf("device %s: record before %v, after %v", d, b, a)
			}
			continue
		}
		b, a = proto.Clone(b).(*geofencepb.DeviceMembership), proto.Clone(a).(*geofencepb.DeviceMembership)
		b.DuplicatesDropped, b.StaleDropped, b.ExpiredDropped = 0, 0, 0
		a.DuplicatesDropped, a.StaleDropped, a.ExpiredDropped = 0, 0, 0
		if !proto.Equal(a, b) {
			t.Fatalf("device %s changed by a replay:\nbefore %v\nafter  %v", d, b, a)
		}
	}
}

// changesPartitions reads occupancy-changes to its end and checks every
// record is keyed by its fence and sits on the partition the pinned
// partitioner names.
func changesPartitions(t *testing.T, cl cluster.Config, adm *kadm.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, geofence.TopicOccupancyChanges)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	if want == 0 {
		t.Fatal("no changes written")
	}
	c := embeddedtest.Client(t, cl, kgo.ConsumeTopics(geofence.TopicOccupancyChanges), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	codec := codecs.For[geofencepb.OccupancyChange]()
	n := int64(0)
	for n < want {
		f := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d changes", n, want)
		}
		for _, r := range f.Records() {
			n++
			ch, err := codec.Unmarshal(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Key) != ch.FenceId {
				t.Fatalf("change keyed %q for fence %q", r.Key, ch.FenceId)
			}
			if p := topology.PartitionFor(ch.FenceId, itPartitions); r.Partition != p {
				t.Fatalf("fence %s's change on partition %d, murmur2 says %d", ch.FenceId, r.Partition, p)
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
