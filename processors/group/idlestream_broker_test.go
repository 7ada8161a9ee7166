package group_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// A sparse input on a broker: a key on partition 0 arms a stream-time timer
// one minute after its ping, then ten minutes of records arrive only on
// partition 1. Stream time is per partition: by default partition 0's stays
// at the ping, so a look sends no tick, and the timer fires only when another
// record arrives on partition 0. With IdleStreamTime(5m), partition 0 idle
// for ten minutes takes the wall clock as its stream time and the timer
// fires, stamped at its due time.
func TestStreamTimerOnIdlePartition(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []group.Opt
	}{
		{"default", nil},
		{"IdleStreamTime", []group.Opt{group.IdleStreamTime(5 * time.Minute)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			idle := c.opts != nil
			cl := embeddedtest.Cluster(t)
			topo := timerTopology(rebalanceParts)
			if _, err := group.CheckBroker(context.Background(), cl, topo, true); err != nil {
				t.Fatal(err)
			}
			g := group.New[state](topo, testGroup, quiet)
			group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
				return c.SetTimer("silence", c.EventTime().Add(time.Minute), group.StreamClock)
			}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
			fired := group.Output[testpb.Trigger](g, topicOut)
			group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
				fired.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name, EventTimeMs: tm.At.UnixMilli()})
				return nil
			})
			wall := &wallClock{at: time.UnixMilli(base)}
			ctx, cancel := context.WithCancel(context.Background())
			opts := append([]group.Opt{group.StateDir(t.TempDir()), group.Clock(wall.now), group.TimerInterval(time.Hour)}, c.opts...)
			proc, err := g.Processor(ctx, cl, opts...)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- proc.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			prod := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ping := func(key string, at time.Time) {
				t.Helper()
				v, _ := codecs.For[testpb.Ping]().Marshal(&testpb.Ping{DeviceId: key, DeviceTimeMs: at.UnixMilli()})
				r := &kgo.Record{Topic: topicIn, Partition: topology.PartitionFor(key, rebalanceParts), Key: []byte(key), Value: v}
				if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			processed := func(n int) {
				t.Helper()
				waitFor(t, fmt.Sprintf("%d pings applied", n), 2*time.Minute, func() bool { got, _ := proc.Processed(topicIn); return got == n })
			}
			look := func() int64 {
				t.Helper()
				before := proc.TimerStats().TicksSent
				if err := proc.FireTimers(context.Background()); err != nil {
					t.Fatal(err)
				}
				return proc.TimerStats().TicksSent - before
			}
			quietKey, busyKey, otherKey := keyOn("quiet", 0), keyOn("busy", 1), keyOn("other", 0)
			start := time.UnixMilli(base)

			ping(quietKey, start)
			processed(1)
			wall.set(start.Add(10 * time.Minute))
			for i := 1; i <= 10; i++ { // partition 1 keeps receiving: one ping a minute
				ping(busyKey, start.Add(time.Duration(i)*time.Minute))
			}
			processed(11)
			sent := look()
			if !idle {
				// Partition 0's stream time is still the ping's; busy's timer
				// (stream time + 1m on partition 1) is not due either.
				if sent != 0 {
					t.Fatalf("a look sent %d ticks; want none: no partition's stream time reached a timer", sent)
				}
				// Another record on partition 0 moves its stream time.
				ping(otherKey, start.Add(10*time.Minute))
				processed(12)
				sent = look()
			}
			if sent != 1 {
				t.Fatalf("a look sent %d ticks, want 1 (%s's timer)", sent, quietKey)
			}
			embeddedtest.ConsumeUntil(t, cl, topicOut, func(rs []*kgo.Record) bool {
				for _, r := range rs {
					if string(r.Key) != quietKey {
						t.Fatalf("fired for %s, want only %s", r.Key, quietKey)
					}
					tr, err := codecs.For[testpb.Trigger]().Unmarshal(r.Value)
					if err != nil || tr.GetEventTimeMs() != start.Add(time.Minute).UnixMilli() {
						t.Fatalf("timer output %v (%v), want it stamped at its due time %v", tr, err, start.Add(time.Minute))
					}
					return true
				}
				return false
			})
		})
	}
}
