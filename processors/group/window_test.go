package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// commitsStalled is what the processor sees while the broker is unreachable
// (the chaos test's outage): nothing committed, so every input applied since
// may be redelivered.
func commitsStalled(string, int32) (int64, bool) { return 0, true }

// hotKey produces n pings of one device (one partition), HLC 100 up.
func hotKey(t *testing.T, ctx context.Context, kc *kgo.Client, key string, n int) {
	t.Helper()
	for i := range n {
		v, _ := proto.Marshal(&testpb.Ping{DeviceId: key, Hlc: uint64(100 + i)})
		if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topicIn, Key: []byte(key), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// windowWaits reads fencestream_replay_window_waits_total of the test
// group's input (0 when the metric does not exist).
func windowWaits(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fencestream_replay_window_waits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == testGroup && labels["topic"] == topicIn {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestHotKeyWaitsForCommitsInsteadOfForgetting is the chaos test's lost
// trigger: one key gets more inputs than the replay window while nothing can
// be committed, then everything since the old commit is redelivered. Every
// redelivered input must re-emit what it emitted (its first emission may
// have failed in the outage): none may be beyond the window. The kit keeps
// that by making the key's next input wait for the commit once the window is
// full, instead of forgetting the oldest.
func TestHotKeyWaitsForCommitsInsteadOfForgetting(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	adm := kadm.NewClient(kc)
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	// n well above the window: Goka may still hand over inputs after the
	// stop's context ended (applied then), and the redelivery must have new
	// ones left that fill the window again.
	const window, n = 4, 40
	hotKey(t, ctx, kc, "hot", n)
	h := &counting{}
	stateDir := t.TempDir()
	build := func(opts ...group.Opt) *group.Processor {
		proc, err := validGroupOut(topo, h.handle).Processor(ctx, cluster.Config{Brokers: cl.Brokers},
			append([]group.Opt{group.StateDir(stateDir), group.ReplayWindow(window)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return proc
	}

	// The outage: commits do not advance. The key's inputs stop at the
	// window (on the old code all n are applied and the oldest forgotten).
	waits0, atWait := windowWaits(t), int64(-1)
	runFor(t, build(group.CommittedOffsets(commitsStalled)), "outage", func() bool {
		if windowWaits(t) > waits0 {
			atWait = h.calls.Load() // none is applied while one waits
			return true
		}
		return h.calls.Load() == n
	})
	if atWait != window {
		t.Errorf("with commits stalled, %d inputs of one key applied before the next waited (-1: none waited), want the window, %d", atWait, window)
	}
	// At the stop the waiting input and any Goka hands over after its
	// context ended are applied (beyond the window, nothing forgotten).
	first := h.calls.Load()

	// Redelivery from the old commit (none), with the broker's commits: the
	// waits end only because Goka commits the earlier inputs meanwhile.
	if _, err := adm.DeleteGroup(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	beyond0, reemitted0, waits1 := replayCount(t, "beyond-window"), replayCount(t, "re-emitted"), windowWaits(t)
	proc := build()
	runFor(t, proc, "redelivery", func() bool {
		got, _ := proc.Processed(topicIn)
		return got == n && h.calls.Load() == n
	})
	if got := replayCount(t, "beyond-window") - beyond0; got != 0 {
		t.Errorf("%v redelivered inputs beyond the window (outputs not re-emitted), want none", got)
	}
	if got := replayCount(t, "re-emitted") - reemitted0; got != float64(first) {
		t.Errorf("re-emitted %v redelivered inputs, want all %d applied before", got, first)
	}
	if first < n-window && windowWaits(t) == waits1 {
		t.Errorf("the redelivery of %d inputs of one key never waited for a commit with a window of %d", n, window)
	}
	want := int(int64(n) + first)
	recs := embeddedtest.ConsumeUntil(t, cl, topicOut, func(r []*kgo.Record) bool { return len(r) >= want })
	seen := map[string]int{}
	for _, r := range recs {
		var tr testpb.Trigger
		if err := proto.Unmarshal(r.Value, &tr); err != nil {
			t.Fatal(err)
		}
		seen[tr.GetTriggerId()]++
	}
	for i := 1; i <= n; i++ {
		id, times := fmt.Sprintf("hot|%d", i), 1
		if int64(i) <= first {
			times = 2 // emitted in the outage, re-emitted by the redelivery
		}
		if seen[id] != times {
			t.Errorf("trigger %s produced %d times, want %d", id, seen[id], times)
		}
	}
	if len(recs) != want {
		t.Errorf("%d outputs, want %d", len(recs), want)
	}
}

// TestWindowWaitEndsWithContext: a callback waiting for a commit that never
// comes does not hold up a stop (or a rebalance, which ends the partition's
// context the same way); the input it held is applied, nothing dropped.
func TestWindowWaitEndsWithContext(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err := topo.Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	const window = 3
	hotKey(t, ctx, kc, "hot", window+3)
	h := &counting{}
	proc, err := validGroupOut(topo, h.handle).Processor(ctx, cluster.Config{Brokers: cl.Brokers},
		group.StateDir(t.TempDir()), group.ReplayWindow(window), group.CommittedOffsets(commitsStalled))
	if err != nil {
		t.Fatal(err)
	}
	waits0 := windowWaits(t)
	r := runInBackground(proc)
	r.until(t, "a wait for the commit", time.Minute, func() bool { return windowWaits(t) > waits0 })
	if got := h.calls.Load(); got != window {
		t.Errorf("%d inputs applied before the wait, want the window, %d", got, window)
	}
	start := time.Now()
	r.shutdown(t)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("stop took %s with a callback waiting", d)
	}
	// Goka may hand over a few more inputs after the context ended: they
	// are applied too, with nothing trimmed.
	if got := h.calls.Load(); got < window+1 {
		t.Errorf("%d inputs applied after the stop, want at least the window and the one that waited (%d)", got, window+1)
	}
}
