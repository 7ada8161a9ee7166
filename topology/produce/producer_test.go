package produce_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/codecs/hotkeypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
	"github.com/fencestream/fencestream/topology/hlc"
	"github.com/fencestream/fencestream/topology/produce"
)

// testTopology declares what these tests write to: pings as the pipeline
// declares it, a topic written by a foreign (franz-go) producer, a topic
// where hot keys may be salted, and the hot-keys record.
func testTopology() *topology.Topology {
	g := geofence.Topology()
	return &topology.Topology{
		Name: "produce-test",
		Topics: []topology.Topic{
			g.MustTopic(geofence.TopicPings),
			g.MustTopic(topology.TopicHotKeys),
			{Name: "foreign-pings", Key: "device_id", Partitions: 24, Cleanup: topology.CleanupDelete},
			{Name: "bursts", Key: "device_id", Value: "fencestream.v1.Ping", Partitions: 6, Cleanup: topology.CleanupDelete, Salting: true,
				Doc: "telemetry whose consumers do not need per-device order"},
		},
	}
}

type env struct {
	top     *topology.Topology
	cluster cluster.Config
	kcl     *kgo.Client
	adm     *kadm.Client
}

func start(t *testing.T) *env {
	t.Helper()
	b := embeddedtest.Start(t)
	kcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcl.Close)
	e := &env{top: testTopology(), cluster: cluster.Config{Brokers: b.Addrs()}, kcl: kcl, adm: kadm.NewClient(kcl)}
	if err := e.top.Ensure(ctx(t), e.adm); err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func newProducer(t *testing.T, e *env, topic string, opts ...produce.Opt) *produce.Producer[pb.Ping, *pb.Ping] {
	t.Helper()
	p, err := produce.New[pb.Ping](e.cluster, e.top.MustTopic(topic), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consume reads a topic from the start until it has n records (and the end
// offsets say there are exactly n), or fails at the deadline.
func consume(t *testing.T, e *env, topic string, n int) []*kgo.Record {
	t.Helper()
	c := ctx(t)
	if got := endOffsets(t, e, topic); got != int64(n) {
		t.Fatalf("%s holds %d records, want %d", topic, got, n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(c)
		if c.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", len(out), n, topic, c.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func endOffsets(t *testing.T, e *env, topic string) int64 {
	t.Helper()
	offs, err := e.adm.ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		sum += o.Offset
	})
	return sum
}

func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// randomKeys are valid keys: ASCII and multi-byte UTF-8, 1-120 bytes.
func randomKeys(n int) []string {
	rng := rand.New(rand.NewPCG(7, 2026))
	runes := []rune("abcdefxyz0123456789-_:ЖжїЇґ車両中文🚗😀")
	seen := map[string]bool{}
	var keys []string
	for len(keys) < n {
		var b strings.Builder
		size := 1 + rng.IntN(120)
		for b.Len() < size {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		if k := b.String(); len(k) <= topology.MaxKeyBytes && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return append(keys, "device-0", "пристрій-1", "user-1") // sign bit set, and a seed vector
}

// (a) franz-go's default producer (Java-compatible murmur2) and ours put
// every key on the partition PartitionFor names.
func TestKeysLandWherePartitionForSays(t *testing.T) {
	e := start(t)
	keys := randomKeys(2000)

	p := newProducer(t, e, geofence.TopicPings, produce.HotKeys(produce.HotKeyPolicy{}))
	waits := make([]func() error, 0, len(keys))
	for _, k := range keys {
		wait, err := p.EmitAsync(k, &pb.Ping{DeviceId: k, Lat: 50, Lon: 30})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, wait)
	}
	waitAll(t, waits)

	foreign := make([]*kgo.Record, 0, len(keys))
	for _, k := range keys {
		foreign = append(foreign, &kgo.Record{Topic: "foreign-pings", Key: []byte(k), Value: []byte("v")})
	}
	if err := e.kcl.ProduceSync(ctx(t), foreign...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, topic := range []string{geofence.TopicPings, "foreign-pings"} {
		recs := consume(t, e, topic, len(keys))
		seen := map[string]bool{}
		used := map[int32]bool{}
		for _, r := range recs {
			k := string(r.Key)
			seen[k] = true
			used[r.Partition] = true
			if want := topology.PartitionFor(k, 24); r.Partition != want {
				t.Fatalf("%s: key %q on partition %d, PartitionFor says %d", topic, k, r.Partition, want)
			}
			if topic == geofence.TopicPings {
				var ping pb.Ping
				if err := proto.Unmarshal(r.Value, &ping); err != nil || ping.GetDeviceId() != k {
					t.Fatalf("record of %q holds %v (%v)", k, &ping, err)
				}
			}
		}
		if len(seen) != len(keys) || len(used) != 24 {
			t.Fatalf("%s: %d distinct keys over %d partitions, want %d over 24", topic, len(seen), len(used), len(keys))
		}
	}
}

// (b) refused keys: typed errors, counted, and nothing on the topic.
func TestRefusedKeysSendNothing(t *testing.T) {
	e := start(t)
	p := newProducer(t, e, geofence.TopicPings)
	cases := []struct {
		key    string
		want   error
		reason string
	}{
		{"", topology.ErrEmptyKey, produce.ReasonEmpty},
		{"dev\xff-1", topology.ErrInvalidUTF8, produce.ReasonInvalidUTF8},
		{strings.Repeat("d", 256), topology.ErrKeyTooLong, produce.ReasonTooLong},
	}
	for _, c := range cases {
		labels := map[string]string{"topic": geofence.TopicPings, "reason": c.reason}
		before := counter(t, "fencestream_producer_rejected_keys_total", labels)
		check := func(how string, err error) {
			t.Helper()
			var ke *topology.KeyError
			if !errors.Is(err, c.want) || !errors.As(err, &ke) {
				t.Fatalf("%s(%q) = %v, want a *KeyError wrapping %v", how, c.key, err, c.want)
			}
			if ke.Topic != geofence.TopicPings || ke.Key != c.key || !strings.Contains(err.Error(), "for topic pings") {
				t.Fatalf("%s: KeyError %+v does not name the topic and key", how, ke)
			}
		}
		msg := &pb.Ping{DeviceId: c.key}
		check("Emit", p.Emit(ctx(t), c.key, msg))
		wait, err := p.EmitAsync(c.key, msg)
		if wait != nil {
			t.Fatal("EmitAsync returned a wait func for a refused key")
		}
		check("EmitAsync", err)
		if msg.GetHlc() != 0 {
			t.Fatal("a refused message was stamped")
		}
		if got := counter(t, "fencestream_producer_rejected_keys_total", labels) - before; got != 2 {
			t.Fatalf("rejected_keys_total{reason=%s} rose by %v, want 2", c.reason, got)
		}
	}
	// A custom limit applies too.
	short := newProducer(t, e, geofence.TopicPings, produce.KeyLimit(8))
	if err := short.Emit(ctx(t), "device-42", &pb.Ping{}); !errors.Is(err, topology.ErrKeyTooLong) {
		t.Fatalf("9-byte key with limit 8: %v", err)
	}

	if n := endOffsets(t, e, geofence.TopicPings); n != 0 {
		t.Fatalf("pings holds %d records after only refused keys", n)
	}
	// The same producer still works, and only that one record arrives.
	before := counter(t, "fencestream_producer_records_total", map[string]string{"topic": geofence.TopicPings})
	if err := p.Emit(ctx(t), "dev-1", &pb.Ping{DeviceId: "dev-1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := short.Close(); err != nil {
		t.Fatal(err)
	}
	recs := consume(t, e, geofence.TopicPings, 1)
	if string(recs[0].Key) != "dev-1" {
		t.Fatalf("record key %q", recs[0].Key)
	}
	if got := counter(t, "fencestream_producer_records_total", map[string]string{"topic": geofence.TopicPings}) - before; got != 1 {
		t.Fatalf("records_total rose by %v, want 1", got)
	}
	if err := p.Emit(ctx(t), "dev-1", &pb.Ping{}); !errors.Is(err, produce.ErrClosed) {
		t.Fatalf("Emit after Close = %v, want ErrClosed", err)
	}
}

// (c) every record is stamped; stamps rise strictly per producer, also while
// the wall clock goes backwards, and are stored in stamp order per partition.
func TestHLCStampedAndIncreasing(t *testing.T) {
	e := start(t)
	var wallMs atomic.Int64
	wallMs.Store(1_700_000_000_000)
	clock := hlc.New(func() time.Time {
		// Mostly standing still, sometimes jumping back a second.
		ms := wallMs.Add(1)
		if ms%7 == 0 {
			wallMs.Add(-1000)
		}
		return time.UnixMilli(ms)
	})
	p := newProducer(t, e, geofence.TopicPings, produce.HLC(clock), produce.HotKeys(produce.HotKeyPolicy{}), produce.Linger(0))

	// Sequentially: each stamp is above the previous; a preset value is
	// overwritten (the producer is the stamping authority).
	var prev uint64
	for i := range 50 {
		msg := &pb.Ping{DeviceId: "dev-seq", Hlc: 42}
		if err := p.Emit(ctx(t), "dev-seq", msg); err != nil {
			t.Fatal(err)
		}
		if msg.GetHlc() <= prev || msg.GetHlc() == 42 {
			t.Fatalf("emit %d: stamp %d after %d", i, msg.GetHlc(), prev)
		}
		prev = msg.GetHlc()
	}

	// Concurrently, few keys: on the broker, every partition's records are in
	// strictly increasing stamp order.
	const goroutines, each = 8, 250
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			var waits []func() error
			for i := range each {
				key := fmt.Sprintf("dev-%d", (g+i)%5)
				w, err := p.EmitAsync(key, &pb.Ping{DeviceId: key})
				if err != nil {
					errs <- err
					return
				}
				waits = append(waits, w)
			}
			for _, w := range waits {
				if err := w(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := 50 + goroutines*each
	recs := consume(t, e, geofence.TopicPings, total)
	last := map[int32]uint64{}
	seen := map[uint64]bool{}
	for _, r := range recs { // in offset order within a partition
		var ping pb.Ping
		if err := proto.Unmarshal(r.Value, &ping); err != nil {
			t.Fatal(err)
		}
		h := ping.GetHlc()
		if h == 0 {
			t.Fatalf("unstamped record at %d/%d", r.Partition, r.Offset)
		}
		if h <= last[r.Partition] {
			t.Fatalf("partition %d offset %d: HLC %d after %d", r.Partition, r.Offset, h, last[r.Partition])
		}
		last[r.Partition] = h
		if seen[h] {
			t.Fatalf("HLC %d issued twice", h)
		}
		seen[h] = true
	}
	if clock.Last() < prev || len(seen) != total {
		t.Fatalf("clock at %d, %d distinct stamps of %d", clock.Last(), len(seen), total)
	}
}

// Messages without an hlc field are sent untouched.
func TestNoHLCField(t *testing.T) {
	e := start(t)
	p, err := produce.New[hotkeypb.HotKey](e.cluster, e.top.MustTopic(topology.TopicHotKeys), produce.HotKeyRecorder(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := &hotkeypb.HotKey{Topic: "pings", Key: "k", RatePerS: 3}
	if err := p.Emit(ctx(t), "pings/k", want); err != nil {
		t.Fatal(err)
	}
	recs := consume(t, e, topology.TopicHotKeys, 1)
	var got hotkeypb.HotKey
	if err := proto.Unmarshal(recs[0].Value, &got); err != nil || !proto.Equal(&got, want) {
		t.Fatalf("got %v (%v)", &got, err)
	}
	// And a producer refuses a topic declared for another schema.
	if _, err := produce.New[pb.Fence](e.cluster, e.top.MustTopic(geofence.TopicPings)); err == nil || !strings.Contains(err.Error(), "carries fencestream.v1.Ping") {
		t.Fatalf("Fence producer on pings: %v", err)
	}
}

func waitAll(t *testing.T, waits []func() error) {
	t.Helper()
	for _, w := range waits {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
}

type fakeNow struct{ ms atomic.Int64 }

func (f *fakeNow) now() time.Time          { return time.UnixMilli(f.ms.Load()) }
func (f *fakeNow) advance(d time.Duration) { f.ms.Add(d.Milliseconds()) }

// (d) a hot key on pings is reported, never salted: every record keeps its
// key (and so its partition and order).
func TestHotKeyReportedNotSaltedOnPings(t *testing.T) {
	e := start(t)
	clk := &fakeNow{}
	clk.ms.Store(1_700_000_000_000)
	var mu sync.Mutex
	var decisions []*hotkeypb.HotKey
	p := newProducer(t, e, geofence.TopicPings,
		produce.HotKeys(produce.HotKeyPolicy{Threshold: 10, Window: time.Second, SaltBuckets: 4, Now: clk.now}),
		produce.HotKeyRecorder(func(d *hotkeypb.HotKey) { mu.Lock(); decisions = append(decisions, d); mu.Unlock() }))
	labels := map[string]string{"topic": geofence.TopicPings, "decision": produce.DecisionReported}
	before := counter(t, "fencestream_hot_keys_total", labels)

	var waits []func() error
	emit := func(key string, n int) {
		for range n {
			w, err := p.EmitAsync(key, &pb.Ping{DeviceId: key})
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, w)
		}
	}
	emit("dev-hot", 30)
	emit("dev-cold", 5)
	clk.advance(time.Second) // next window: reported again
	emit("dev-hot", 30)
	waitAll(t, waits)

	mu.Lock()
	got := decisions
	mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d decisions, want one per window: %v", len(got), got)
	}
	for _, d := range got {
		if d.GetSalted() || d.GetKey() != "dev-hot" || d.GetTopic() != geofence.TopicPings || d.GetRatePerS() <= 10 {
			t.Fatalf("decision %v", d)
		}
	}
	if n := counter(t, "fencestream_hot_keys_total", labels) - before; n != 2 {
		t.Fatalf("hot_keys_total{decision=reported} rose by %v, want 2", n)
	}
	for _, r := range consume(t, e, geofence.TopicPings, 65) {
		if k := string(r.Key); k != "dev-hot" && k != "dev-cold" {
			t.Fatalf("key %q on pings: a hot key was salted", k)
		}
		if len(r.Headers) != 0 {
			t.Fatalf("unexpected headers %v", r.Headers)
		}
		if r.Partition != topology.PartitionFor(string(r.Key), 24) {
			t.Fatalf("%q on %d", r.Key, r.Partition)
		}
	}
}

// (d) on a topic declared with Salting, a hot key is split into key#0..#3,
// and the decision lands on the hot-keys topic once.
func TestHotKeySaltedWhereAllowed(t *testing.T) {
	e := start(t)
	clk := &fakeNow{}
	clk.ms.Store(1_700_000_000_000)
	p := newProducer(t, e, "bursts",
		produce.HotKeys(produce.HotKeyPolicy{Threshold: 10, Window: time.Second, SaltBuckets: 4, Now: clk.now}))
	labels := map[string]string{"topic": "bursts", "decision": produce.DecisionSalted}
	before := counter(t, "fencestream_hot_keys_total", labels)

	var waits []func() error
	for range 50 {
		w, err := p.EmitAsync("dev-hot", &pb.Ping{DeviceId: "dev-hot"})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	waitAll(t, waits)
	if err := p.Close(); err != nil { // flushes the hot-key record too
		t.Fatal(err)
	}

	perKey := map[string]int{}
	for _, r := range consume(t, e, "bursts", 50) {
		k := string(r.Key)
		perKey[k]++
		if r.Partition != topology.PartitionFor(k, 6) {
			t.Fatalf("%q on partition %d, PartitionFor says %d", k, r.Partition, topology.PartitionFor(k, 6))
		}
		salted := strings.HasPrefix(k, "dev-hot#")
		hasHeader := len(r.Headers) == 1 && r.Headers[0].Key == produce.HeaderSaltedFrom && string(r.Headers[0].Value) == "dev-hot"
		if salted != hasHeader {
			t.Fatalf("record %q headers %v", k, r.Headers)
		}
	}
	want := map[string]int{"dev-hot": 10, "dev-hot#0": 10, "dev-hot#1": 10, "dev-hot#2": 10, "dev-hot#3": 10}
	if fmt.Sprint(perKey) != fmt.Sprint(want) {
		t.Fatalf("records per key %v, want %v", perKey, want)
	}

	recs := consume(t, e, topology.TopicHotKeys, 1)
	var d hotkeypb.HotKey
	if err := proto.Unmarshal(recs[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if string(recs[0].Key) != "bursts/dev-hot" || !d.GetSalted() || d.GetSaltBuckets() != 4 || d.GetKey() != "dev-hot" ||
		d.GetTopic() != "bursts" || d.GetRatePerS() != 11 || d.GetDecidedAtMs() != 1_700_000_000_000 {
		t.Fatalf("hot-keys record %q = %v", recs[0].Key, &d)
	}
	if n := counter(t, "fencestream_hot_keys_total", labels) - before; n != 1 {
		t.Fatalf("hot_keys_total{decision=salted} rose by %v, want 1", n)
	}
}

// Emit honours its context: a cancelled context sends nothing.
func TestEmitCancelledContext(t *testing.T) {
	e := start(t)
	p := newProducer(t, e, geofence.TopicPings)
	c, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Emit(c, "dev-1", &pb.Ping{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Emit with a cancelled context = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := endOffsets(t, e, geofence.TopicPings); n != 0 {
		t.Fatalf("%d records sent with a cancelled context", n)
	}
}

// TestRefusesTopicWithOtherPartitionCount: a producer whose topic declaration
// disagrees with the broker would hash every key modulo the wrong number.
func TestRefusesTopicWithOtherPartitionCount(t *testing.T) {
	e := start(t)
	wrong := e.top.MustTopic(geofence.TopicPings)
	wrong.Partitions = 6
	_, err := produce.New[pb.Ping](e.cluster, wrong)
	var mm *topology.MismatchError
	if !errors.As(err, &mm) || mm.Topic != geofence.TopicPings || mm.Declared != "6" || mm.Actual != "24" {
		t.Fatalf("New with 6 declared partitions on a 24-partition topic: %v", err)
	}
	missing := wrong
	missing.Name = "no-such-topic"
	if _, err := produce.New[pb.Ping](e.cluster, missing); !errors.Is(err, topology.ErrMismatch) {
		t.Fatalf("New on a missing topic: %v", err)
	}
}
