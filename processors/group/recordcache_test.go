package group_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// countPings counts a device's pings and emits a trigger whose id is the count
// it reached, so an input applied twice emits a trigger no single run emits.
func countPings(out outT, c *ctxT, p *testpb.Ping) error {
	st := c.State()
	if st == nil {
		st = &testpb.DeviceState{DeviceId: c.Key()}
	}
	st.Pings++
	c.SetState(st)
	out.Emit(c, c.Key(), &testpb.Trigger{TriggerId: fmt.Sprintf("%s|%d", c.Key(), st.Pings), DeviceId: c.Key(), Hlc: p.GetHlc()})
	return nil
}

// produceCounts sends perKey pings to each of keys.
func produceCounts(t *testing.T, kc *kgo.Client, keys []string, perKey int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range perKey {
		for _, k := range keys {
			v, _ := proto.Marshal(&testpb.Ping{DeviceId: k, Hlc: uint64(100 + i)})
			recs = append(recs, &kgo.Record{Topic: topicIn, Key: []byte(k), Value: v})
		}
	}
	if err := kc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committedSum is the sum of the test group's committed offsets on topicIn.
func committedSum(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, testGroup)
	if err != nil {
		return -1
	}
	var n int64
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topicIn && o.At > 0 {
			n += o.At
		}
	})
	return n
}

// tableStates reads the table's changelog and returns each key's last state
// and how many records it has.
func tableStates(t *testing.T, cl cluster.Config, adm *kadm.Client) (map[string]*testpb.DeviceState, map[string]int) {
	t.Helper()
	want := endOffsets(t, adm, topicTab)
	recs := embeddedtest.ConsumeUntil(t, cl, topicTab, func(r []*kgo.Record) bool { return int64(len(r)) >= want })
	last, n := map[string]*testpb.DeviceState{}, map[string]int{}
	for _, r := range recs {
		st, err := tablecodec.DecodeState[testpb.DeviceState](r.Value)
		if err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		last[string(r.Key)], n[string(r.Key)] = st, n[string(r.Key)]+1
	}
	return last, n
}

// TestRecordCacheOneChangelogRecordPerKey: with the record cache on, a hot
// key updated many times within one commit interval is written to the
// changelog once, with the state of every update; its inputs' offsets are
// committed with that write; a restart reads it back and goes on from it.
func TestRecordCacheOneChangelogRecordPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := testTopology(2)
	kc := embeddedtest.Client(t, cl)
	adm := kadm.NewClient(kc)
	if err := topo.Ensure(context.Background(), adm); err != nil {
		t.Fatal(err)
	}
	const hot = 200
	cold := []string{"c0", "c1", "c2", "c3"}
	produceCounts(t, kc, []string{"hot"}, hot)
	produceCounts(t, kc, cold, 3)
	total := int64(hot + 3*len(cold))
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	build := func() *group.Processor {
		// One interval for the whole run: the flush is the one at the stop
		// (a window of uncommitted inputs as large as the run, so the hot key
		// never waits for a commit, which flushes at once).
		p, err := validGroupOut(topo, countPings).Processor(context.Background(), cl, group.StateDir(dir),
			group.RecordCache(1<<20), group.CommitInterval(time.Hour), group.ReplayWindow(2*hot), group.Registerer(reg))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	runFor(t, build(), "first run", func() bool { return endOffsets(t, adm, topicOut) == total })
	states, writes := tableStates(t, cl, adm)
	if writes["hot"] != 1 || states["hot"].GetPings() != hot {
		t.Errorf("hot key: %d changelog records, last with %d pings; want 1 with %d", writes["hot"], states["hot"].GetPings(), hot)
	}
	for _, k := range cold {
		if writes[k] != 1 || states[k].GetPings() != 3 {
			t.Errorf("%s: %d changelog records, last with %d pings; want 1 with 3", k, writes[k], states[k].GetPings())
		}
	}
	if got := committedSum(t, adm); got != total {
		t.Errorf("committed %d inputs, want %d", got, total)
	}
	// Every input but each key's first found its key in the cache.
	keys := float64(1 + len(cold))
	if hits, flushed := counter(t, reg, "fencestream_record_cache_hits_total"), counter(t, reg, "fencestream_record_cache_flushed_keys_total"); hits != float64(total)-keys || flushed != keys {
		t.Errorf("metrics: %v hits, %v keys flushed; want %v and %v", hits, flushed, float64(total)-keys, keys)
	}

	produceCounts(t, kc, []string{"hot"}, 1)
	runFor(t, build(), "restart", func() bool { return endOffsets(t, adm, topicOut) == total+1 })
	recs := embeddedtest.ConsumeUntil(t, cl, topicOut, func(r []*kgo.Record) bool { return int64(len(r)) == total+1 })
	var tr testpb.Trigger
	for _, r := range recs { // the hot key's last
		if string(r.Key) == "hot" {
			if err := proto.Unmarshal(r.Value, &tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := fmt.Sprintf("hot|%d", hot+1); tr.GetTriggerId() != want {
		t.Errorf("after the restart the hot key's next trigger is %q, want %q", tr.GetTriggerId(), want)
	}
	if _, writes := tableStates(t, cl, adm); writes["hot"] != 2 {
		t.Errorf("hot key: %d changelog records after the second run, want 2", writes["hot"])
	}
}

// TestRecordCacheKilledBeforeFlush: a process killed (SIGKILL) after its
// callbacks wrote to the record cache and emitted, before any flush, loses
// nothing and applies nothing twice: the restarted processor finds no
// committed offset and no table value, runs the inputs again on the state
// they first saw, and emits exactly the records the killed one emitted
// (downstream sees each twice, byte for byte, as after any crash); the
// final states count every ping once.
func TestRecordCacheKilledBeforeFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test; waits a session timeout")
	}
	cl := embeddedtest.Cluster(t)
	topo := testTopology(2)
	kc := embeddedtest.Client(t, cl)
	adm := kadm.NewClient(kc)
	if err := topo.Ensure(context.Background(), adm); err != nil {
		t.Fatal(err)
	}
	keys := []string{"d0", "d1", "d2", "d3", "d4", "d5"}
	const perKey = 10
	produceCounts(t, kc, keys, perKey)
	total := int64(len(keys) * perKey)
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRecordCacheChild$")
	cmd.Env = append(os.Environ(), "RECORDCACHE_CHILD_BROKERS="+strings.Join(cl.Brokers, ","), "RECORDCACHE_CHILD_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
	waitFor(t, "the child emitted for every input", time.Minute, func() bool { return endOffsets(t, adm, topicOut) == total })
	if n := endOffsets(t, adm, topicTab); n != 0 {
		t.Fatalf("the child flushed %d table records before the kill; the test needs it killed before any flush", n)
	}
	// Sarama commits what was marked every second: for three of its
	// intervals, none of the inputs (whose writes wait in the cache) is.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if got := committedSum(t, adm); got != 0 {
			t.Fatalf("committed %d inputs whose table writes were never flushed", got)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()

	p, err := validGroupOut(topo, countPings).Processor(context.Background(), cl, group.StateDir(dir),
		group.RecordCache(1<<20), group.CommitInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, p, "restart after the kill", func() bool {
		return endOffsets(t, adm, topicOut) >= 2*total && committedSum(t, adm) == total
	})
	if n := endOffsets(t, adm, topicOut); n != 2*total {
		t.Errorf("%d outputs, want %d (the killed run's, then the same again)", n, 2*total)
	}
	recs := embeddedtest.ConsumeUntil(t, cl, topicOut, func(r []*kgo.Record) bool { return int64(len(r)) == 2*total })
	byKey := map[string][][]byte{}
	for _, r := range recs {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r.Value)
	}
	for _, k := range keys {
		vals := byKey[k]
		if len(vals) != 2*perKey {
			t.Errorf("%s: %d outputs, want %d", k, len(vals), 2*perKey)
			continue
		}
		for i := range perKey {
			var tr testpb.Trigger
			_ = proto.Unmarshal(vals[i], &tr)
			if want := fmt.Sprintf("%s|%d", k, i+1); tr.GetTriggerId() != want {
				t.Errorf("%s: output %d is %q, want %q", k, i, tr.GetTriggerId(), want)
			}
			if !bytes.Equal(vals[i], vals[perKey+i]) {
				t.Errorf("%s: output %d after the restart differs from the killed run's", k, i)
			}
		}
	}
	states, _ := tableStates(t, cl, adm)
	for _, k := range keys {
		if got := states[k].GetPings(); got != perKey {
			t.Errorf("%s: stored state counts %d pings, want %d", k, got, perKey)
		}
	}
}

// TestRecordCacheChild is the process TestRecordCacheKilledBeforeFlush kills:
// its cache never flushes on its own (one interval of an hour).
func TestRecordCacheChild(t *testing.T) {
	brokers := os.Getenv("RECORDCACHE_CHILD_BROKERS")
	if brokers == "" {
		t.Skip("run by TestRecordCacheKilledBeforeFlush")
	}
	cl := cluster.Config{Brokers: strings.Split(brokers, ",")}
	p, err := validGroupOut(testTopology(2), countPings).Processor(context.Background(), cl,
		group.StateDir(os.Getenv("RECORDCACHE_CHILD_DIR")), group.RecordCache(1<<20), group.CommitInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Run(context.Background()) // until killed
}
