package main

import (
	"context"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
	"github.com/fencestream/fencestream/topology/hlc"
)

// TestMaxClockSkew: with --max-clock-skew 1m, a consistent trigger a year
// ahead is dead-lettered future-hlc and sends no count change, while a
// trigger of now is counted. On main the flag did nothing for occupancy: the
// year-ahead trigger was applied (and held its device at the fence).
func TestMaxClockSkew(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t)
	brokers := strings.Join(b.Addrs(), ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	logs := &logBuffer{}
	var started sync.Once
	go func() {
		done <- run(ctx, []string{"--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "2", "--metrics-addr", "",
			"--max-clock-skew", "1m"}, logs, func(*group.Processor) { started.Do(func() { close(ready) }) })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run ended before ready: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready within 60s")
	}

	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	codec := codecs.For[geofencepb.Trigger]()
	now := time.Now()
	trigger := func(device string, at time.Time) *kgo.Record {
		h := hlc.Pack(at.UnixMilli(), 0)
		v, err := codec.Marshal(&geofencepb.Trigger{
			TriggerId: geofence.TriggerID(device, "depot", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, h),
			DeviceId:  device, FenceId: "depot", Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER,
			Reason:      geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED,
			EventTimeMs: at.UnixMilli(), Hlc: h, CatalogueVersion: 1 << 30, // a catalogue newer than occupancy's
		})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: geofence.TopicTriggers, Key: []byte(device), Value: v}
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if err := kc.ProduceSync(pctx, trigger("ahead", now.Add(365*24*time.Hour)), trigger("now", now)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	read, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(topology.TopicDeadLetter, geofence.TopicOccupancyChanges),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close()
	var dead, changes []string
	deadline := time.Now().Add(60 * time.Second)
	for len(dead) < 1 || len(changes) < 1 {
		fctx, fcancel := context.WithTimeout(ctx, time.Second)
		fs := read.PollFetches(fctx)
		fcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == geofence.TopicOccupancyChanges {
				ch, err := codecs.For[geofencepb.OccupancyChange]().Unmarshal(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				changes = append(changes, ch.GetDeviceId())
				return
			}
			var reason string
			for _, h := range r.Headers {
				if h.Key == deadletter.HeaderReason {
					reason = string(h.Value)
				}
			}
			dead = append(dead, string(r.Key)+" "+reason)
		})
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: dead letters %q, count changes from %q; want [ahead future-hlc] and [now]\n%s", dead, changes, logs)
		}
	}
	if len(dead) != 1 || dead[0] != "ahead "+deadletter.ReasonFutureHLC || len(changes) != 1 || changes[0] != "now" {
		t.Fatalf("dead letters %q, count changes from %q; want [ahead future-hlc] and [now]", dead, changes)
	}
}
