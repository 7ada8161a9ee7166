package group_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// topicFixture is a broker with the test topology, pings produced, and a
// processor of the counting group running on it.
type topicFixture struct {
	cl       cluster.Config
	kc       *kgo.Client
	adm      *kadm.Client
	h        *counting
	reg      *prometheus.Registry
	stateDir string
	logs     *embeddedtest.SyncBuffer
	r        *running
}

func startTopicFixture(t *testing.T, devices int) *topicFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("broker test")
	}
	f := &topicFixture{cl: embeddedtest.Cluster(t), h: &counting{}, reg: prometheus.NewRegistry(), stateDir: t.TempDir(), logs: &embeddedtest.SyncBuffer{}}
	f.kc = embeddedtest.Client(t, f.cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	f.adm = kadm.NewClient(f.kc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testTopology(2).Ensure(ctx, f.adm); err != nil {
		t.Fatal(err)
	}
	produce(t, f.kc, devices, 100)
	proc, err := f.build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.r = runInBackground(proc)
	t.Cleanup(f.r.stop)
	f.r.until(t, "first pings", time.Minute, func() bool { return f.h.calls.Load() == int64(devices) && proc.Ready() == nil })
	return f
}

func (f *topicFixture) build(ctx context.Context) (*group.Processor, error) {
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	return validGroupOutLogged(testTopology(2), log, f.h.handle).Processor(ctx, f.cl, group.StateDir(f.stateDir), group.Registerer(f.reg),
		group.TopicCheckInterval(300*time.Millisecond), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond))
}

// stopped waits for Run to end by itself and returns its error.
func (f *topicFixture) stopped(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-f.r.done:
		return err
	case <-time.After(within):
		t.Fatalf("Run still going %v after the topic changed (ready: %v; handler calls %d)", within, f.r.proc.Ready(), f.h.calls.Load())
		return nil
	}
}

func changes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "fencestream_topic_changes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var topic, change string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "topic":
					topic = l.GetValue()
				case "change":
					change = l.GetValue()
				}
			}
			out[topic+"/"+change] += m.GetCounter().GetValue()
		}
	}
	return out
}

// TestRecreatedTopicStopsTheGroup: the group's input topic is deleted and
// recreated (same name, new topic id) under a running processor, and pings
// go to the new topic. The processor stops by itself with ErrTopicChanged
// naming the topic and both ids (on main it ran on, applying the old topic's
// offsets and envelopes to the new one: ready all along), counted in
// fencestream_topic_changes_total, with a bounded number of log lines. A
// restart on the same state directory is refused; after the operator's reset
// (group offsets and state directory deleted) every ping of the new topic is
// applied: nothing from the old topic is applied to the new one, nothing of
// the new one is lost.
func TestRecreatedTopicStopsTheGroup(t *testing.T) {
	const devices = 20
	f := startTopicFixture(t, devices)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := f.adm.ListTopics(ctx, topicIn)
	if err != nil {
		t.Fatal(err)
	}
	oldID := before[topicIn].ID.String()
	if _, err := f.adm.DeleteTopics(ctx, topicIn); err != nil {
		t.Fatal(err)
	}
	if err := testTopology(2).Ensure(ctx, f.adm); err != nil {
		t.Fatal(err)
	}
	after, err := f.adm.ListTopics(ctx, topicIn)
	if err != nil {
		t.Fatal(err)
	}
	newID := after[topicIn].ID.String()
	if oldID == newID {
		t.Fatalf("the recreated topic kept its id %s", oldID)
	}
	// A fresh client: one that produced to the old topic keeps its id for a while.
	f.kc = embeddedtest.Client(t, f.cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	f.adm = kadm.NewClient(f.kc)
	produce(t, f.kc, 5, 200)

	runErr := f.stopped(t, time.Minute)
	var tce *group.TopicChangeError
	if !errors.Is(runErr, group.ErrTopicChanged) || !errors.Is(runErr, group.ErrPermanent) || !errors.As(runErr, &tce) || tce.Topic != topicIn {
		t.Fatalf("Run = %v; want a *TopicChangeError for %s (ErrTopicChanged, ErrPermanent)", runErr, topicIn)
	}
	if !strings.Contains(runErr.Error(), oldID) || (tce.Change == group.TopicRecreated && !strings.Contains(runErr.Error(), newID)) || !strings.Contains(runErr.Error(), "fencectl reset") {
		t.Fatalf("Run = %v; want the old id %s (and the new %s when seen recreated) and the fix", runErr, oldID, newID)
	}
	if ready := f.r.proc.Ready(); ready == nil || !strings.Contains(ready.Error(), topicIn) {
		t.Fatalf("Ready after the change = %v; want the reason naming %s", ready, topicIn)
	}
	if got := changes(t, f.reg); got[topicIn+"/"+tce.Change] != 1 || len(got) != 1 {
		t.Fatalf("fencestream_topic_changes_total = %v; want 1 for %s/%s", got, topicIn, tce.Change)
	}
	if n := strings.Count(f.logs.String(), "\n"); n > 60 {
		t.Fatalf("%d log lines between start and the stop; want a bounded few:\n%s", n, f.logs.String())
	}
	t.Logf("stopped: %v", runErr)

	// The decision survives a restart: the same state directory is refused.
	if _, err := f.build(ctx); !errors.Is(err, group.ErrTopicChanged) {
		t.Fatalf("restart on the state built from the old topic = %v; want ErrTopicChanged", err)
	}
	// The operator's reset (what fencectl reset does): the group's offsets,
	// its table's changelog and its local state go. The changelog holds the
	// envelopes that remember the old topic's offsets: kept, they would take
	// the new topic's first records for replays.
	if _, err := f.adm.DeleteGroup(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	ends, err := f.adm.ListEndOffsets(ctx, topicTab)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.adm.DeleteRecords(ctx, ends.Offsets()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.stateDir, testGroup)); err != nil {
		t.Fatal(err)
	}
	calls := f.h.calls.Load()
	proc, err := f.build(ctx)
	if err != nil {
		t.Fatalf("after the reset: %v", err)
	}
	f.r = runInBackground(proc)
	f.r.until(t, "the new topic's pings after the reset", time.Minute, func() bool { return f.h.calls.Load() >= calls+5 && proc.Ready() == nil })
	f.r.shutdown(t)
	if got := f.h.calls.Load() - calls; got != 5 {
		t.Fatalf("after the reset the handler ran %d times, want the new topic's 5 pings", got)
	}
}

// TestAddedPartitionsStopTheGroup: the input topic grows from 2 to 3
// partitions under a running processor. It stops by itself with
// ErrTopicChanged naming the topic and both counts (on main it stayed ready
// and never read the new partition), counted in
// fencestream_topic_changes_total; Ready keeps the reason.
func TestAddedPartitionsStopTheGroup(t *testing.T) {
	f := startTopicFixture(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.adm.CreatePartitions(ctx, 1, topicIn); err != nil {
		t.Fatal(err)
	}
	runErr := f.stopped(t, time.Minute)
	var tce *group.TopicChangeError
	if !errors.As(runErr, &tce) || tce.Change != group.TopicPartitions || tce.OldParts != 2 || tce.NewParts != 3 || !errors.Is(runErr, group.ErrPermanent) {
		t.Fatalf("Run = %v; want a partitions change of %s from 2 to 3", runErr, topicIn)
	}
	if !strings.Contains(runErr.Error(), "from 2 to 3 partitions") || !strings.Contains(runErr.Error(), topicIn) {
		t.Fatalf("Run = %v; want the topic and both counts", runErr)
	}
	if ready := f.r.proc.Ready(); ready == nil || !strings.Contains(ready.Error(), "from 2 to 3 partitions") {
		t.Fatalf("Ready after the change = %v; want the reason", ready)
	}
	if got := changes(t, f.reg); got[topicIn+"/"+group.TopicPartitions] != 1 {
		t.Fatalf("fencestream_topic_changes_total = %v; want 1 for %s/partitions", got, topicIn)
	}
}

// TestDeletedOutputTopicStopsTheGroup: the topic the group emits to is
// deleted while inputs keep coming (the debouncer's fence-triggers in the
// operator's report). The processor stops by itself naming the output topic
// (on main it restarted forever, logging only sarama's "circuit breaker is
// open"), with a bounded number of log lines.
func TestDeletedOutputTopicStopsTheGroup(t *testing.T) {
	f := startTopicFixture(t, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.adm.DeleteTopics(ctx, topicOut); err != nil {
		t.Fatal(err)
	}
	produce(t, f.kc, 10, 200)
	runErr := f.stopped(t, time.Minute)
	var tce *group.TopicChangeError
	if !errors.As(runErr, &tce) || tce.Topic != topicOut || !errors.Is(runErr, group.ErrPermanent) {
		t.Fatalf("Run = %v; want a *TopicChangeError for %s", runErr, topicOut)
	}
	if ready := f.r.proc.Ready(); ready == nil || !strings.Contains(ready.Error(), topicOut) {
		t.Fatalf("Ready after the change = %v; want the reason naming %s", ready, topicOut)
	}
	if n := strings.Count(f.logs.String(), "\n"); n > 60 {
		t.Fatalf("%d log lines between start and the stop; want a bounded few:\n%s", n, f.logs.String())
	}
	t.Logf("%s: %v", tce.Change, runErr)
}
