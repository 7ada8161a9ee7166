package fenceview_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// TestTriggerFeedSurvivesRecreatedTopic: the triggers topic is deleted under
// the live feed, stays away for a while, and is recreated. Meanwhile the feed
// backs off (a bounded number of failed polls and log lines: on main it
// polled and logged in a tight loop, 8.9 million lines in 2 minutes), and
// after the recreation it follows the new topic (on main it stayed on the old
// topic id, UNKNOWN_TOPIC_ID forever): a trigger written to the new topic
// reaches a subscriber.
func TestTriggerFeedSurvivesRecreatedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, kc := startBroker(t, ctx)
	adm := kadm.NewClient(kc)
	logs := &embeddedtest.SyncBuffer{}
	reg := prometheus.NewRegistry()
	feed := fenceview.NewFeed(16)
	c, err := fenceview.NewTriggerConsumer(cl, feed, slog.New(slog.NewTextHandler(logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-c.Ready():
	case <-time.After(time.Minute):
		t.Fatal("feed not ready")
	}
	sub := feed.Subscribe(fenceview.Filter{})
	defer sub.Close()
	send := func(kc *kgo.Client, id string) {
		t.Helper()
		produce(t, ctx, kc, geofence.TopicTriggers, "d1", &geofencepb.Trigger{TriggerId: id, DeviceId: "d1", FenceId: "f1"}, e2ePartitions)
	}
	receive := func(id string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case tr := <-sub.C:
				if tr.GetTriggerId() == id {
					return
				}
			case <-deadline:
				t.Fatalf("trigger %s never reached the feed (fetch errors %v); log:\n%.3000s", id, gathered(t, reg, "fencestream_feed_fetch_errors_total"), logs.String())
			}
		}
	}
	send(kc, "before")
	receive("before")

	if _, err := adm.DeleteTopics(ctx, geofence.TopicTriggers); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// The outage lasts until the feed has failed a few polls, backing off.
	for gathered(t, reg, "fencestream_feed_fetch_errors_total") < 5 && strings.Count(logs.String(), "fetching triggers failed") < 5 {
		if time.Since(deleted) > time.Minute {
			t.Fatalf("the feed saw no fetch errors after the topic was deleted; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	kc2 := embeddedtest.Client(t, cl)
	if err := geofence.Topology(geofence.Partitions(e2ePartitions)).Ensure(ctx, kadm.NewClient(kc2)); err != nil {
		t.Fatal(err)
	}
	outage := time.Since(deleted)
	send(kc2, "after")
	receive("after")
	polls := gathered(t, reg, "fencestream_feed_fetch_errors_total")
	lines := strings.Count(logs.String(), "\n")
	t.Logf("outage %v: %v failed polls, %d log lines", outage, polls, lines)
	// Backoff from 100 ms (jittered to at least half) doubling: far fewer
	// than one failed poll per 50 ms, and one warning per 10 s.
	if limit := 10 + outage.Seconds()*20; polls > limit {
		t.Fatalf("%v failed polls in an outage of %v: want at most %v", polls, outage, limit)
	}
	if lines > 12 {
		t.Fatalf("%d log lines: want a bounded few:\n%s", lines, logs.String())
	}
}
