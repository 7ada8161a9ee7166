package grouptest

import (
	"bytes"
	"context"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/boundedlog"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// Records too large to be dead-lettered whole (DESIGN rule 19): each fits a
// real broker's default max.message.bytes (and kfake's, 1,048,588), but its
// dead letter, the same key and value plus the kit's headers, is more than
// sarama's default Producer.MaxMessageBytes (1,048,576) and than the topic's
// limit.
const (
	// BrokerLimitBytes is Kafka's (and kfake's) default max.message.bytes.
	BrokerLimitBytes = 1_048_588
	// OversizeBytes is the size of the oversized key or value.
	OversizeBytes = 1_048_300
)

// Oversized is one oversized record produced, and the dead letter it must
// give.
type Oversized struct {
	Partition   int32
	Offset      int64
	Reason      string // the dead letter's reason header
	KeyBytes    int
	ValueBytes  int
	Description string
}

// ProduceOversized produces to topic, on the partition key lands on (of
// partitions), uncompressed, a record whose key has OversizeBytes bytes and whose value is
// value (reason bad-key), and one under key whose value is OversizeBytes of
// garbage (reason undecodable). The producer is a foreign one (franz-go) with
// a batch limit of BrokerLimitBytes, as any client may have.
func ProduceOversized(t testing.TB, cl cluster.Config, topic, key string, partitions int32, value []byte) []Oversized {
	t.Helper()
	p := topology.PartitionFor(key, partitions)
	prod := embeddedtest.Client(t, cl, kgo.ProducerBatchMaxBytes(BrokerLimitBytes), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	garbage := Garbage(OversizeBytes)
	out := []Oversized{
		{Reason: deadletter.ReasonBadKey, KeyBytes: OversizeBytes, ValueBytes: len(value), Description: "1 MiB key"},
		{Reason: deadletter.ReasonUndecodable, KeyBytes: len(key), ValueBytes: OversizeBytes, Description: "1 MiB garbage value"},
	}
	recs := []*kgo.Record{
		{Topic: topic, Partition: p, Key: bytes.Repeat([]byte("k"), OversizeBytes), Value: value},
		{Topic: topic, Partition: p, Key: []byte(key), Value: garbage},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, r := range recs {
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing the %s: %v", out[i].Description, err)
		}
		out[i].Partition, out[i].Offset = r.Partition, r.Offset
	}
	return out
}

// Garbage is n bytes no protobuf decoder accepts (an invalid varint first)
// and no compression shrinks (random), so the size a broker checks is n.
func Garbage(n int) []byte {
	b := make([]byte, n)
	rnd := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	copy(b, bytes.Repeat([]byte{0xff}, 11))
	return b
}

// Header is the value of header name of r ("" when it has none).
func Header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// CheckCutDown reads the dead-letter topic until it holds the dead letter of
// each record in want (by source topic, partition and offset), and fails the
// test unless each is cut down: its reason, the original sizes, key and
// value prefixes within deadletter.CutKeyBytes and deadletter.CutValueBytes. It
// returns every dead letter read.
func CheckCutDown(t testing.TB, cl cluster.Config, topic string, want []Oversized) []*kgo.Record {
	t.Helper()
	find := func(recs []*kgo.Record, o Oversized) *kgo.Record {
		for _, r := range recs {
			if Header(r, deadletter.HeaderSourceTopic) == topic && Header(r, deadletter.HeaderSourcePartition) == strconv.Itoa(int(o.Partition)) &&
				Header(r, deadletter.HeaderSourceOffset) == strconv.FormatInt(o.Offset, 10) {
				return r
			}
		}
		return nil
	}
	recs := embeddedtest.ConsumeUntil(t, cl, topology.TopicDeadLetter, func(recs []*kgo.Record) bool {
		for _, o := range want {
			if find(recs, o) == nil {
				return false
			}
		}
		return true
	})
	for _, o := range want {
		r := find(recs, o)
		got := map[string]string{}
		for _, h := range []string{deadletter.HeaderReason, deadletter.HeaderCutDown, deadletter.HeaderKeyBytes, deadletter.HeaderValueBytes} {
			got[h] = Header(r, h)
		}
		if got[deadletter.HeaderReason] != o.Reason || got[deadletter.HeaderCutDown] != "true" ||
			got[deadletter.HeaderKeyBytes] != strconv.Itoa(o.KeyBytes) || got[deadletter.HeaderValueBytes] != strconv.Itoa(o.ValueBytes) ||
			len(r.Key) > deadletter.CutKeyBytes || len(r.Value) > deadletter.CutValueBytes {
			t.Errorf("dead letter of the %s: headers %v, key %d bytes, value %d bytes; want reason %s, cut down, sizes %d and %d, prefixes within %d and %d",
				o.Description, got, len(r.Key), len(r.Value), o.Reason, o.KeyBytes, o.ValueBytes, deadletter.CutKeyBytes, deadletter.CutValueBytes)
		}
	}
	return recs
}

// CheckLogBounded fails the test when a line of logs is longer than
// boundedlog.ValueLimit allows for a few attributes, or when logs as a whole
// would hold an oversized key or value (OversizeBytes).
func CheckLogBounded(t testing.TB, logs string) {
	t.Helper()
	const line = 4 * boundedlog.ValueLimit // a message and a few cut attributes
	for i, l := range strings.Split(logs, "\n") {
		if len(l) > line {
			t.Errorf("log line %d has %d bytes (more than %d): %.300s…", i+1, len(l), line, l)
		}
	}
	if len(logs) >= OversizeBytes {
		t.Errorf("the log holds %d bytes: as much as an oversized record", len(logs))
	}
}

// Counter is the sum of the series of counter name in reg whose labels
// include every pair of labels (name, value, name, value…).
func Counter(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// Committed is the offset group has committed on topic's partition (-1:
// none yet).
func Committed(t testing.TB, cl cluster.Config, groupName, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts, err := cl.Kgo()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close() // polled in loops: not one client per call kept to the test's end
	offs, err := kadm.NewClient(kc).FetchOffsets(ctx, groupName)
	if err != nil {
		return -1 // the group is joining: not committed yet
	}
	o, ok := offs.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}
