package group_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

const (
	topicOddOut  = "gt-odd"
	topicEvenOut = "gt-even"
	splitParts   = 2
)

// splitTopology is the test topology with two outputs: input i goes to
// gt-odd or gt-even by the parity of its HLC.
func splitTopology() *topology.Topology {
	topic := func(name, value string, cleanup topology.Cleanup) topology.Topic {
		return topology.Topic{Name: name, Key: "device_id", Value: value, Partitions: splitParts, Cleanup: cleanup}
	}
	return &topology.Topology{
		Name: "grouptest-split",
		Topics: []topology.Topic{
			topic(topicIn, "fencestream.kit.test.v1.Ping", topology.CleanupDelete),
			topic(topicOddOut, "fencestream.kit.test.v1.Trigger", topology.CleanupDelete),
			topic(topicEvenOut, "fencestream.kit.test.v1.Trigger", topology.CleanupDelete),
			topic(topicTab, "fencestream.kit.test.v1.DeviceState", topology.CleanupCompact),
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw", Partitions: splitParts, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group:   testGroup,
			Streams: []string{topicIn},
			Emits:   []string{topicOddOut, topicEvenOut, topology.TopicDeadLetter},
			Table:   topicTab,
			Flows: []topology.Flow{
				{From: topicIn, To: topicTab},
				{From: topicIn, To: topicOddOut},
				{From: topicIn, To: topicEvenOut},
				{From: topicIn, To: topology.TopicDeadLetter},
			},
		}},
	}
}

func splitGroup() *grp {
	g := group.New[state](splitTopology(), testGroup, quiet)
	odd := group.Output[testpb.Trigger](g, topicOddOut)
	even := group.Output[testpb.Trigger](g, topicEvenOut)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &state{DeviceId: c.Key()}
		}
		st.Pings++
		c.SetState(st)
		out := even
		if p.GetHlc()%2 == 1 {
			out = odd
		}
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), Hlc: p.GetHlc()})
		return nil
	})
	return g
}

func splitKeyOn(prefix string, part int32) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if topology.PartitionFor(k, splitParts) == part {
			return k
		}
	}
}

// TestFailedInputIsNotCommittedPast: input 1's emit fails (a non-retriable
// produce error) after input 2's emit was acknowledged. Goka marks in
// acknowledgement order, so on main input 2's mark (3) was committed while
// input 1 was still unanswered, the restart after input 1's error resumed at
// 3, and input 1's output never appeared. The kit commits in input order:
// input 1 is redelivered and its output (recorded in its envelope) produced.
//
// gt-odd is led by its own broker so that its held produce request does not
// hold up gt-even's (requests on one connection are answered in order).
func TestFailedInputIsNotCommittedPast(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t, embedded.Brokers(2))
	cl := cluster.Config{Brokers: b.Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(kc)
	topo := splitTopology()
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := meta.Brokers.NodeIDs()
	if len(ids) != 2 {
		t.Fatalf("brokers %v, want 2", ids)
	}
	for _, tp := range topo.Topics {
		node := ids[0]
		if tp.Name == topicOddOut {
			node = ids[1]
		}
		for p := range int32(splitParts) {
			if err := b.Cluster().MoveTopicPartition(tp.Name, p, node); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The first produce request for gt-odd waits until release, then fails
	// with a non-retriable error; later ones are served normally. kfake
	// keeps the control until it returns, so while the first sleeps it also
	// sees requests of other connections: taken lets only the first through.
	kf := b.Cluster()
	held, release := make(chan struct{}), make(chan struct{})
	var taken atomic.Bool
	kf.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		odd := false
		for _, rt := range pr.Topics {
			odd = odd || rt.Topic == topicOddOut
		}
		if !odd || !taken.CompareAndSwap(false, true) {
			return nil, nil, false // served normally; the control stays
		}
		close(held)
		kf.SleepControl(func() { <-release })
		return embeddedtest.FailProduce(pr, kerr.MessageTooLarge), nil, true
	})
	var releaseOnce bool
	defer func() {
		if !releaseOnce {
			close(release)
		}
	}()

	ping := func(key string, part int32, hlc uint64) *kgo.Record {
		v, _ := proto.Marshal(&testpb.Ping{DeviceId: key, Hlc: hlc})
		return &kgo.Record{Topic: topicIn, Partition: part, Key: []byte(key), Value: v}
	}
	keys := []string{splitKeyOn("in0", 0), splitKeyOn("in1", 0), splitKeyOn("in2", 0)}
	if err := kc.ProduceSync(ctx, ping(keys[0], 0, 0), ping(keys[1], 0, 1), ping(keys[2], 0, 2)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	proc, err := splitGroup().Processor(ctx, cl, group.StateDir(t.TempDir()), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond), group.Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	r := runInBackground(proc)
	defer r.shutdown(t)

	// Inputs 0 and 2 are answered while input 1's emit is held.
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("input 1's emit to gt-odd never reached the broker")
	}
	embeddedtest.ConsumeUntil(t, cl, topicEvenOut, func(recs []*kgo.Record) bool {
		return hasKeys(recs, keys[0], keys[2])
	})
	// A sentinel on the other partition, emitted after input 2 was
	// acknowledged: Goka handles acknowledgements in order on one goroutine,
	// so once the sentinel's mark is committed, input 2's mark was made.
	sentinel := splitKeyOn("sentinel", 1)
	if err := kc.ProduceSync(ctx, ping(sentinel, 1, 4)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.until(t, "the sentinel's offset committed", time.Minute, func() bool { return committed(t, adm, 1) == 1 })
	if c := committed(t, adm, 0); c > 1 {
		t.Errorf("committed offset of %s/0 is %d while input 1's emit is unanswered: it passed input 1", topicIn, c)
	}

	close(release)
	releaseOnce = true
	// The failed emit stops the Goka processor; the kit runs a new one,
	// which resumes at the committed offset.
	r.until(t, "a restart after the failed emit", time.Minute, func() bool { return counter(t, reg, "fencestream_processor_restarts_total") >= 1 })
	r.until(t, "every input committed after the restart", time.Minute, func() bool { return committed(t, adm, 0) == 3 })
	ends, err := adm.ListEndOffsets(ctx, topicOddOut)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	recs := embeddedtest.ConsumeUntil(t, cl, topicOddOut, func(recs []*kgo.Record) bool { return int64(len(recs)) >= n })
	if !hasKeys(recs, keys[1]) {
		t.Fatalf("input 1's output never appeared on %s (%d records): its offset was committed past and it was not processed again", topicOddOut, len(recs))
	}
}

func hasKeys(recs []*kgo.Record, keys ...string) bool {
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r.Key)] = true
	}
	for _, k := range keys {
		if !seen[k] {
			return false
		}
	}
	return true
}

// committed is the group's committed offset of topicIn's partition part, -1
// when none.
func committed(t *testing.T, adm *kadm.Client, part int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, testGroup)
	if err != nil {
		return -1 // the coordinator is busy (a rebalance): ask again
	}
	if o, ok := offs.Lookup(topicIn, part); ok {
		return o.At
	}
	return -1
}
