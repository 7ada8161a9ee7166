package group_test

import (
	"context"
	"errors"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// seenHLCs records the HLCs a handler applied.
type seenHLCs struct {
	mu   sync.Mutex
	hlcs []uint64
}

func (s *seenHLCs) add(h uint64) { s.mu.Lock(); s.hlcs = append(s.hlcs, h); s.mu.Unlock() }

func (s *seenHLCs) has(h uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.hlcs {
		if x == h {
			return true
		}
	}
	return false
}

// panicHLC is the HLC the oversize tests' handler panics on, with a message
// that quotes a megabyte.
const panicHLC = 300

// oversizeGroup runs the test group on cl (ordered by HLC, as the
// debouncer's pings are), logging into logs. Its handler applies every ping
// but the one of panicHLC, on which it panics.
func oversizeGroup(t *testing.T, cl cluster.Config, logs *embeddedtest.SyncBuffer, reg *prometheus.Registry) (*running, *seenHLCs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl)
	topo := testTopology(2)
	if err := topo.Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	seen := &seenHLCs{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g := validGroupOutLogged(topo, log, func(_ outT, c *ctxT, p *testpb.Ping) error {
		if p.GetHlc() == panicHLC {
			panic("cannot handle " + strings.Repeat("x", grouptest.OversizeBytes))
		}
		seen.add(p.GetHlc())
		c.SetState(&testpb.DeviceState{DeviceId: c.Key(), LastHlc: p.GetHlc()})
		return nil
	}, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() }))
	proc, err := g.Processor(ctx, cl, group.StateDir(t.TempDir()), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond), group.Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	r := runInBackground(proc)
	t.Cleanup(r.stop)
	r.until(t, "ready", time.Minute, func() bool { return proc.Ready() == nil })
	return r, seen
}

func pingBytes(t *testing.T, device string, hlc uint64) []byte {
	t.Helper()
	v, err := proto.Marshal(&testpb.Ping{DeviceId: device, Hlc: hlc})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOversizedRecordsMoveOn: records that fit a real broker's limit but not
// whole in a dead letter (a 1 MiB key; 1 MiB of garbage), an empty value and
// a handler that panics quoting a megabyte, between two good pings of one
// device. The partition moves on (the good ping after them is applied), each
// is dead-lettered once with its reason (the oversized ones cut down, with
// their sizes), the processor never restarts, and no log line carries a key
// or value whole. On main the dead letter of the 1 MiB key failed in sarama
// ("larger than configured Producer.MaxMessageBytes") and the processor
// restarted every few seconds without end, logging the key each time.
func TestOversizedRecordsMoveOn(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	logs := &embeddedtest.SyncBuffer{}
	reg := prometheus.NewRegistry()
	r, seen := oversizeGroup(t, cl, logs, reg)

	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(topicIn))
	ctx := context.Background()
	send := func(v []byte) *kgo.Record {
		t.Helper()
		rec := &kgo.Record{Key: []byte("d1"), Value: v}
		if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	send(pingBytes(t, "d1", 100))
	big := grouptest.ProduceOversized(t, cl, topicIn, "d1", 2, pingBytes(t, "d1", 150))
	empty := send([]byte{})
	panicked := send(pingBytes(t, "d1", panicHLC))
	last := send(pingBytes(t, "d1", 400))
	// Moved on: the ping after them applied and committed past (a handler
	// may see it before a failed dead letter stops the processor).
	r.until(t, "the ping after the oversized records applied and committed", 2*time.Minute, func() bool {
		return seen.has(400) && grouptest.Committed(t, cl, testGroup, topicIn, last.Partition) > last.Offset
	})

	dls := grouptest.CheckCutDown(t, cl, topicIn, big)
	for _, want := range []struct {
		rec    *kgo.Record
		reason string
	}{{empty, deadletter.ReasonEmptyValue}, {panicked, deadletter.ReasonPanic}} {
		found := false
		for _, d := range dls {
			if grouptest.Header(d, deadletter.HeaderSourceOffset) == strconv.FormatInt(want.rec.Offset, 10) &&
				grouptest.Header(d, deadletter.HeaderSourcePartition) == strconv.Itoa(int(want.rec.Partition)) {
				found = true
				if got := grouptest.Header(d, deadletter.HeaderReason); got != want.reason {
					t.Errorf("dead letter of offset %d: reason %q, want %q (error %q)", want.rec.Offset, got, want.reason, grouptest.Header(d, deadletter.HeaderError))
				}
				if len(grouptest.Header(d, deadletter.HeaderError)) > 2<<10 {
					t.Errorf("dead letter of offset %d: error header of %d bytes", want.rec.Offset, len(grouptest.Header(d, deadletter.HeaderError)))
				}
			}
		}
		if !found {
			t.Errorf("no dead letter of offset %d (%s)", want.rec.Offset, want.reason)
		}
	}
	if seen.has(150) || seen.has(panicHLC) {
		t.Errorf("handler applied a dead-lettered ping: %v", seen.hlcs)
	}
	for _, reason := range []string{deadletter.ReasonBadKey, deadletter.ReasonUndecodable, deadletter.ReasonEmptyValue, deadletter.ReasonPanic} {
		if n := grouptest.Counter(t, reg, "fencestream_deadletters_total", "reason", reason); n != 1 {
			t.Errorf("fencestream_deadletters_total{reason=%q} = %v, want 1", reason, n)
		}
	}
	if n := grouptest.Counter(t, reg, "fencestream_deadletters_cut_total", "result", "cut-down"); n != 2 {
		t.Errorf("fencestream_deadletters_cut_total{result=cut-down} = %v, want 2", n)
	}
	if n := grouptest.Counter(t, reg, "fencestream_processor_restarts_total"); n != 0 {
		t.Errorf("the processor restarted %v times", n)
	}
	r.shutdown(t)
	out := logs.String()
	grouptest.CheckLogBounded(t, out)
	t.Logf("log: %d bytes, %d lines", len(out), strings.Count(out, "\n"))
}

// TestDeadLetterRefusedForSizeIsSentCutDown: the dead-letter topic's
// max.message.bytes is lowered while the processor runs, so a dead letter the
// processor worked out would fit is refused by the broker. It is sent again
// cut down, once, and the partition moves on.
func TestDeadLetterRefusedForSizeIsSentCutDown(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	logs := &embeddedtest.SyncBuffer{}
	reg := prometheus.NewRegistry()
	r, seen := oversizeGroup(t, cl, logs, reg)

	kc := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(topicIn))
	ctx := context.Background()
	limit := "65536"
	resp, err := kadm.NewClient(kc).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topology.TopicDeadLetter)
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	garbage := &kgo.Record{Key: []byte("d1"), Value: grouptest.Garbage(200_000)}
	last := &kgo.Record{Key: []byte("d1"), Value: pingBytes(t, "d1", 500)}
	if err := kc.ProduceSync(ctx, garbage, last).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the ping after the refused dead letter applied and committed", 2*time.Minute, func() bool {
		return seen.has(500) && grouptest.Committed(t, cl, testGroup, topicIn, last.Partition) > last.Offset
	})
	grouptest.CheckCutDown(t, cl, topicIn, []grouptest.Oversized{{Partition: garbage.Partition, Offset: garbage.Offset,
		Reason: deadletter.ReasonUndecodable, KeyBytes: 2, ValueBytes: 200_000, Description: "200 kB garbage value"}})
	if n := grouptest.Counter(t, reg, "fencestream_deadletters_cut_total", "result", "cut-down"); n != 1 {
		t.Errorf("fencestream_deadletters_cut_total{result=cut-down} = %v, want 1", n)
	}
	if n := grouptest.Counter(t, reg, "fencestream_processor_restarts_total"); n != 0 {
		t.Errorf("the processor restarted %v times", n)
	}
	r.shutdown(t)
	grouptest.CheckLogBounded(t, logs.String())
}

// TestRejectedLargeInputIsRecordedCutDown: a handler rejects a ping of 200 kB
// (a dead letter from inside the callback, recorded in the key's envelope
// with the state so a redelivery re-emits it). Recorded whole, up to the
// replay window's inputs of that size would outgrow the table value's own
// limit; it is recorded, and sent, cut down.
func TestRejectedLargeInputIsRecordedCutDown(t *testing.T) {
	h := grouptest.New(t, time.Now())
	h.Start(validGroup(testTopology(2), func(c *ctxT, p *testpb.Ping) error {
		c.SetState(&testpb.DeviceState{DeviceId: c.Key(), LastHlc: p.GetHlc()})
		if len(p.GetDeviceId()) > topology.MaxKeyBytes {
			return errors.New("device_id is not the key")
		}
		return nil
	}))
	h.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 1})
	h.Consume(topicIn, "d1", &testpb.Ping{DeviceId: strings.Repeat("x", 200_000), Hlc: 2})
	dls := grouptest.DeadLetters(h)
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	if d := dls[0]; d.Reason != deadletter.ReasonInvalid || len(d.Value) > deadletter.CutValueBytes || d.Key != "d1" {
		t.Fatalf("dead letter: key %q, reason %q, value %d bytes", d.Key, d.Reason, len(d.Value))
	}
}
