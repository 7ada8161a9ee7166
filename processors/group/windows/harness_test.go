package windows_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

// The test topology, as the kit's own tests declare it (group_test.go,
// timers_test.go): one group "gt" reading pings from gt-in, keeping its state
// in gt-table, emitting to gt-out, with its timer topic.
const (
	testGroup = "gt"
	topicIn   = "gt-in"
	topicOut  = "gt-out"
	topicTab  = "gt-table"
	base      = int64(1_800_000_000_000)
)

var (
	quiet       = slog.New(slog.DiscardHandler)
	topicTimers = topology.TimersTopicName(testGroup)
)

func timerTopology(partitions int32) *topology.Topology {
	return &topology.Topology{
		Name: "grouptest",
		Topics: []topology.Topic{
			{Name: topicIn, Key: "device_id", Value: "fencestream.kit.test.v1.Ping", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: topicOut, Key: "device_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: partitions, Cleanup: topology.CleanupDelete},
			{Name: topicTab, Key: "device_id", Value: "fencestream.kit.test.v1.DeviceState", Partitions: partitions, Cleanup: topology.CleanupCompact},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw", Partitions: partitions, Cleanup: topology.CleanupDelete},
			topology.TimersTopic(testGroup, "device_id", partitions),
		},
		Processors: []topology.Processor{{
			Group:   testGroup,
			Streams: []string{topicIn},
			Emits:   []string{topicOut, topology.TopicDeadLetter},
			Table:   topicTab,
			Timers:  topicTimers,
			Flows: []topology.Flow{
				{From: topicIn, To: topicTab},
				{From: topicIn, To: topicOut},
				{From: topicIn, To: topology.TopicDeadLetter},
				{From: topicTimers, To: topicTab},
				{From: topicTimers, To: topicOut},
			},
		}},
	}
}

// tableOf is topo with its table topic declared to hold value.
func tableOf(topo *topology.Topology, value string) *topology.Topology {
	for i := range topo.Topics {
		if topo.Topics[i].Name == topicTab {
			topo.Topics[i].Value = value
		}
	}
	return topo
}

// windowTopology is timerTopology(1) for a group whose state is a WindowSet.
func windowTopology() *topology.Topology {
	return tableOf(timerTopology(1), "fencestream.kit.v1.WindowSet")
}

// fireTimers looks for due timers once and lets the ticks run.
func fireTimers(t *testing.T, tt *tester.Tester, proc *group.Processor) {
	t.Helper()
	if err := proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	tt.Catchup()
}

// runUntilCleanup runs fn in a goroutine until the test ends, then cancels it
// and expects a clean stop within a deadline.
func runUntilCleanup(t *testing.T, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("did not stop within 30s")
		}
	})
}

// runFor runs proc until cond holds, then stops it gracefully.
func runFor(t *testing.T, proc *group.Processor, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("%s: not reached within 2 minutes", what)
		}
		select {
		case err := <-done:
			t.Fatalf("%s: processor stopped: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("%s: stop: %v", what, err)
	}
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
