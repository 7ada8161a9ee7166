package versioned_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/versioned"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// On the real embedded broker: a versioned table's history survives a
// restart on fresh disks (both groups' state comes back from their
// changelogs), a redelivery of every ping re-emits exactly the records the
// as-of join produced the first time, and a late ping after the restart
// joins the version that was live at its time.
func TestVersionedJoinRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := versionedTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	adm := kadm.NewClient(kc)
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	produce := func(topic, key string, m proto.Message) {
		t.Helper()
		v, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t0 := versionedT0()
	spec := versioned.Spec{History: 24 * time.Hour, MaxVersions: 16}

	// run runs a processor until the returned stop.
	run := func(p *group.Processor) (stop func()) {
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			rcancel()
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	// The joiner forgets no redelivered input (commits unknown), as for
	// inputs since its last commit. A Goka join reads the table's partition
	// as this instance has read it so far (processing-time sync, as in
	// Kafka Streams); it recovers the table before it processes anything, so
	// the joiner starts once the table holds the versions the test asks
	// for.
	startWriter := func(dir string) (stop func()) {
		writer, _, _ := versionedGroups(topo, spec, true)
		p, err := writer.Processor(ctx, cluster.Config{Brokers: cl.Brokers}, group.StateDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		return run(p)
	}
	startJoiner := func(dir string) (stop func()) {
		_, joiner, _ := versionedGroups(topo, spec, true)
		p, err := joiner.Processor(ctx, cluster.Config{Brokers: cl.Brokers}, group.StateDir(dir), group.CommittedOffsets(commitsUnknown))
		if err != nil {
			t.Fatal(err)
		}
		return run(p)
	}
	view, err := group.NewView[kitpb.VersionSet](cluster.Config{Brokers: cl.Brokers}, vtWriter+"-table")
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, view)
	waitVersions := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			st, err := view.Get("d1")
			if err == nil && len(st.GetVersions()) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("d1's versions in the table: %v (err %v), want %d", st, err, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	joined := func(n int) []*kgo.Record {
		t.Helper()
		return embeddedtest.ConsumeUntil(t, cl, vtJoined, func(r []*kgo.Record) bool { return len(r) >= n })
	}
	describe := func(recs []*kgo.Record) []string {
		var out []string
		for _, r := range recs {
			var tr testpb.Trigger
			if err := proto.Unmarshal(r.Value, &tr); err != nil {
				t.Fatal(err)
			}
			kind, _, _ := strings.Cut(tr.GetTriggerId(), "|")
			out = append(out, fmt.Sprintf("%s +%dm %s", kind, time.UnixMilli(tr.GetEventTimeMs()).Sub(t0)/time.Minute, tr.GetFenceId()))
		}
		return out
	}

	dir := t.TempDir()
	stopW := startWriter(filepath.Join(dir, "w1"))
	produce(vtChanges, "d1", change(t0, "d1", "fence-v1", 0))
	produce(vtChanges, "d1", change(t0, "d1", "fence-v2", 10*time.Minute))
	produce(vtChanges, "d1", change(t0, "d1", "fence-v1b", 7*time.Minute)) // late: history
	waitVersions(3)
	stopJ := startJoiner(filepath.Join(dir, "j1"))
	produce(vtPings, "d1", ping(t0, "d1", 15*time.Minute))
	produce(vtPings, "d1", ping(t0, "d1", 5*time.Minute)) // late: joins v1
	first := joined(4)
	want := []string{"inner +15m fence-v2", "left +15m fence-v2", "inner +5m fence-v1", "left +5m fence-v1"}
	if got := describe(first); !slices.Equal(got, want) {
		t.Fatalf("first run joined %q, want %q", got, want)
	}
	stopJ()
	stopW()

	// Other instances take over on fresh disks, and the joiner's commits
	// are forgotten: every ping is delivered again.
	if _, err := adm.DeleteGroup(ctx, vtJoiner); err != nil {
		t.Fatal(err)
	}
	startWriter(filepath.Join(dir, "w2"))
	startJoiner(filepath.Join(dir, "j2"))
	recs := joined(8)
	for i := range 4 {
		if !bytes.Equal(recs[i].Value, recs[4+i].Value) || !bytes.Equal(recs[i].Key, recs[4+i].Key) {
			t.Fatalf("redelivered ping's output %d differs: %q, first %q", i, describe(recs[4:]), describe(recs[:4]))
		}
	}
	// History came back from the changelog: late pings join the version
	// live at their time.
	produce(vtPings, "d1", ping(t0, "d1", 6*time.Minute))
	produce(vtPings, "d1", ping(t0, "d1", 8*time.Minute))
	produce(vtPings, "d1", ping(t0, "d1", 12*time.Minute))
	produce(vtPings, "d1", ping(t0, "d1", -time.Minute))
	recs = joined(15)
	want = []string{"inner +6m fence-v1", "left +6m fence-v1", "inner +8m fence-v1b", "left +8m fence-v1b", "inner +12m fence-v2", "left +12m fence-v2", "left +-1m -"}
	if got := describe(recs[8:]); !slices.Equal(got, want) {
		t.Fatalf("after the restart joined %q, want %q", got, want)
	}
	// The writer's own history came back too: a new change adds a fourth
	// version (a writer that lost it would store one).
	produce(vtChanges, "d1", change(t0, "d1", "fence-v4", 30*time.Minute))
	waitVersions(4)
}
