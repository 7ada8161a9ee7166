package debounce_test

import (
	"context"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// runDebouncer runs a debouncer against the broker until the test ends.
func runDebouncer(t *testing.T, cl cluster.Config, d *debounce.Debouncer, stateDir string) *group.Processor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := d.Group().Processor(ctx, cl, group.StateDir(stateDir))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("debouncer: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	if err := proc.WaitForReadyContext(wctx); err != nil {
		t.Fatalf("debouncer not ready: %v", err)
	}
	return proc
}

// TestDeviceStateLandsInTheJavaPartition writes pings with franz-go's default
// producer (Java-compatible murmur2) to a 24-partition topic and shows that each
// device's state is kept in, written to, and read back from the partition
// PartitionFor names; poison records in between go to the dead-letter topic and
// nothing valid is lost.
func TestDeviceStateLandsInTheJavaPartition(t *testing.T) {
	cl := embeddedtest.Cluster(t)
	d, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.Defaults(testSettings()))
	if err != nil {
		t.Fatal(err)
	}
	runDebouncer(t, cl, d, t.TempDir())

	const devices = 120
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicPings))
	ctx := context.Background()
	pingPartition := map[string]int32{}
	codec := codecs.For[geofencepb.Ping]()
	var hlc uint64
	for i := 0; i < 4; i++ {
		for n := 0; n < devices; n++ {
			dev := fmt.Sprintf("veh-%03d", n)
			hlc++
			v, _ := codec.Marshal(&geofencepb.Ping{DeviceId: dev, Lat: insideLat, Lon: centerLon, AccuracyM: 2,
				DeviceTimeMs: 1_800_000_000_000 + int64(i)*1000, Hlc: hlc})
			r := &kgo.Record{Key: []byte(dev), Value: v}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			pingPartition[dev] = r.Partition
		}
		if i == 1 { // poison in the middle of the stream
			for _, r := range []*kgo.Record{
				{Key: []byte("veh-000"), Value: []byte{0xff, 0xff, 0xff}},
				{Key: nil, Value: []byte("no key")},
				{Key: []byte{}, Value: []byte("empty key")},
			} {
				if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for dev, p := range pingPartition {
		if want := topology.PartitionFor(dev, 24); p != want {
			t.Fatalf("franz-go put %s on %d, PartitionFor says %d", dev, p, want)
		}
	}

	// Every device's ENTER arrives on the device's partition of fence-triggers.
	trigs := embeddedtest.ConsumeUntil(t, cl, geofence.TopicTriggers, func(r []*kgo.Record) bool { return len(r) >= devices })
	for _, r := range trigs {
		if want := pingPartition[string(r.Key)]; r.Partition != want {
			t.Fatalf("trigger of %s on partition %d, its pings are on %d", r.Key, r.Partition, want)
		}
	}
	// State is written to the table topic on the device's partition...
	seen := map[string]bool{}
	embeddedtest.ConsumeUntil(t, cl, geofence.TopicDebouncer, func(recs []*kgo.Record) bool {
		for _, r := range recs {
			if want := pingPartition[string(r.Key)]; r.Partition != want {
				t.Fatalf("state of %s written to partition %d, want %d", r.Key, r.Partition, want)
			}
			st, err := tablecodec.DecodeState[geofencepb.DeviceState](r.Value)
			if err == nil && st.Pings == 4 {
				seen[string(r.Key)] = true
			}
		}
		return len(seen) == devices
	})
	// ...and read back through a view hashed with the pinned partitioner.
	tv, err := view.New[geofencepb.DeviceState](cl, geofence.TopicDebouncer)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, tv)
	for dev, p := range pingPartition {
		st, err := tv.Get(dev)
		if err != nil || st == nil {
			t.Fatalf("view.Get(%s) = %v, %v: a view with the wrong hasher looks in the wrong partition", dev, st, err)
		}
		if st.Partition != p || st.Pings != 4 || debounce.FenceStateOf(st, "zone-1").GetPhase() != geofencepb.Phase_PHASE_INSIDE {
			t.Fatalf("state of %s: partition %d (want %d), pings %d, fences %v", dev, st.Partition, p, st.Pings, st.FenceStates)
		}
	}
	// The three poison records are dead-lettered with their reasons.
	dl := embeddedtest.ConsumeUntil(t, cl, topology.TopicDeadLetter, func(r []*kgo.Record) bool { return len(r) >= 3 })
	reasons := map[string]bool{}
	for _, r := range dl {
		for _, h := range r.Headers {
			if h.Key == deadletter.HeaderReason {
				reasons[string(h.Value)] = true
			}
		}
	}
	// Null and empty keys are told apart (issue 17).
	if !reasons[deadletter.ReasonUndecodable] || !reasons[deadletter.ReasonNullKey] || !reasons[deadletter.ReasonEmptyKey] || len(dl) != 3 {
		t.Fatalf("dead letters: %d records, reasons %v", len(dl), reasons)
	}
}

// TestNewGroupStartsAtOldestOffset produces every ping before the debouncer's
// group exists; with Goka's default (newest) the records produced while the
// group joins would be skipped for good. All must be applied.
func TestNewGroupStartsAtOldestOffset(t *testing.T) {
	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology()
	// Create topics first, exactly as the binaries would, then produce.
	if _, err := group.CheckBroker(context.Background(), cl, topo, true); err != nil {
		t.Fatal(err)
	}
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicPings))
	codec := codecs.For[geofencepb.Ping]()
	const devices, perDevice = 300, 3
	var recs []*kgo.Record
	for i := 0; i < perDevice; i++ {
		for n := 0; n < devices; n++ {
			dev := fmt.Sprintf("early-%03d", n)
			v, _ := codec.Marshal(&geofencepb.Ping{DeviceId: dev, Lat: outsideLat, Lon: centerLon, DeviceTimeMs: 1_800_000_000_000 + int64(i)*1000, Hlc: uint64(i*devices + n + 1)})
			recs = append(recs, &kgo.Record{Key: []byte(dev), Value: v})
		}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d, err := debounce.New(topo, testCatalogue(t), debounce.Defaults(testSettings()))
	if err != nil {
		t.Fatal(err)
	}
	runDebouncer(t, cl, d, t.TempDir())
	done := map[string]bool{}
	embeddedtest.ConsumeUntil(t, cl, geofence.TopicDebouncer, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			st, err := tablecodec.DecodeState[geofencepb.DeviceState](r.Value)
			if err == nil && st.Pings == perDevice {
				done[string(r.Key)] = true
			}
		}
		return len(done) == devices
	})
}
