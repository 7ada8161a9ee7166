package debounce_test

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
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestOversizedPingsMoveOn (issue 31): between a device's pings, a ping
// whose key has 1 MiB, a value of 1 MiB of garbage (each fits a real
// broker's limit, neither fits whole in a dead letter) and a stale ping. The
// debouncer moves past them: the device's next ping is applied and committed,
// the oversized ones are dead-lettered cut down with their sizes, each dead
// letter is counted once, the stale ping is counted in
// fencestream_stale_pings_total (0 on main: the kit dead-letters stale pings
// before the handler, which alone counted them), the processor never
// restarts and the log stays small. On main the debouncer restarted every
// ~5 s without end, its log growing by a megabyte each time.
func TestOversizedPingsMoveOn(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	reg := prometheus.NewRegistry()
	logs := &embeddedtest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.Defaults(testSettings()), debounce.Registerer(reg), debounce.Logger(log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := d.Group().Processor(ctx, cl, append(d.ProcessorOpts(), group.StateDir(t.TempDir()), group.Registerer(reg),
		group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond))...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("debouncer: %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := proc.WaitForReadyContext(wctx); err != nil {
		t.Fatalf("debouncer not ready: %v", err)
	}

	const dev = "veh-1"
	codec := codecs.For[geofencepb.Ping]()
	ping := func(h uint64) []byte {
		v, _ := codec.Marshal(&geofencepb.Ping{DeviceId: dev, Lat: insideLat, Lon: centerLon, AccuracyM: 2,
			DeviceTimeMs: 1_800_000_000_000 + int64(h)*1000, Hlc: h})
		return v
	}
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicPings))
	send := func(v []byte) *kgo.Record {
		t.Helper()
		r := &kgo.Record{Key: []byte(dev), Value: v}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	send(ping(10))
	send(ping(20))
	big := grouptest.ProduceOversized(t, cl, geofence.TopicPings, dev, 24, ping(25))
	send(ping(15)) // stale
	last := send(ping(30))

	deadline := time.Now().Add(2 * time.Minute)
	for grouptest.Committed(t, cl, geofence.GroupDebouncer, geofence.TopicPings, last.Partition) <= last.Offset {
		if time.Now().After(deadline) {
			t.Fatalf("the debouncer did not commit past the ping after the oversized ones (offset %d); restarts: %v",
				last.Offset, grouptest.Counter(t, reg, "fencestream_processor_restarts_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	grouptest.CheckCutDown(t, cl, geofence.TopicPings, big)
	for reason, want := range map[string]float64{deadletter.ReasonBadKey: 1, deadletter.ReasonUndecodable: 1, deadletter.ReasonStale: 1} {
		if n := grouptest.Counter(t, reg, "fencestream_deadletters_total", "group", geofence.GroupDebouncer, "reason", reason); n != want {
			t.Errorf("fencestream_deadletters_total{reason=%q} = %v, want %v", reason, n, want)
		}
	}
	if n := grouptest.Counter(t, reg, "fencestream_stale_pings_total"); n != 1 {
		t.Errorf("fencestream_stale_pings_total = %v, want 1", n)
	}
	if n := grouptest.Counter(t, reg, "fencestream_pings_processed_total"); n != 3 {
		t.Errorf("fencestream_pings_processed_total = %v, want 3 (HLC 10, 20, 30)", n)
	}
	if n := grouptest.Counter(t, reg, "fencestream_processor_restarts_total"); n != 0 {
		t.Errorf("the debouncer restarted %v times", n)
	}
	grouptest.CheckLogBounded(t, logs.String())
	if st := topology.PartitionFor(dev, 24); big[0].Partition != st {
		t.Fatalf("oversized records on partition %d, the device's is %d", big[0].Partition, st)
	}
}
