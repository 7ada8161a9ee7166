package group_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleTimersAtScale runs a real processor (embedded broker, Pebble,
// 24 partitions, the default TimerInterval) whose table holds
// FENCESTREAM_TIMER_KEYS keys (default 1,000,000), each with a stream timer
// that is not due, recovered from the changelog; 10 of them also hold a wall
// timer due 3 s after the processor is ready. It reports the time to ready
// (recovery and index build), the process's CPU per second while idle (the
// broker runs in the same process, so this bounds the processor's), and how
// late after its due time the first wall timer's trigger was read.
func BenchmarkIdleTimersAtScale(b *testing.B) {
	keys := 1_000_000
	if s := os.Getenv("FENCESTREAM_TIMER_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		keys = n
	}
	const parts = 24
	for b.Loop() {
		cl := embeddedtest.Cluster(b)
		if _, err := group.CheckBroker(context.Background(), cl, timerTopology(parts), true); err != nil {
			b.Fatal(err)
		}
		prod := embeddedtest.Client(b, cl, kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<16))
		ctx := context.Background()
		for i := 0; i < keys; {
			var recs []*kgo.Record
			for ; i < keys && len(recs) < 50_000; i++ {
				env := &kitpb.Envelope{State: make([]byte, 94), HasState: true,
					Timers: []*kitpb.Timer{{Name: "silence", AtMs: time.Now().Add(24 * time.Hour).UnixMilli(), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}}
				v, err := group.EncodeEnvelope(env)
				if err != nil {
					b.Fatal(err)
				}
				recs = append(recs, &kgo.Record{Topic: topicTab, Key: []byte(fmt.Sprintf("device-%07d", i)), Value: v})
			}
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		g := group.New[state](timerTopology(parts), testGroup, quiet)
		group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
			return c.SetTimer("wall", time.UnixMilli(p.GetDeviceTimeMs()), group.WallClock)
		})
		fired := group.Output[testpb.Trigger](g, topicOut)
		group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
			fired.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name, EventTimeMs: tm.At.UnixMilli()})
			return nil
		})
		start := time.Now()
		runCtx, cancel := context.WithCancel(ctx)
		p, err := g.Processor(runCtx, cl, group.StateDir(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		for p.TimerStats().Indexed < keys {
			time.Sleep(100 * time.Millisecond) // polling a local counter
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("indexed %d of %d after 20 min", p.TimerStats().Indexed, keys)
			}
		}
		ready := time.Since(start)
		b.ReportMetric(ready.Seconds(), "s-to-index")

		const idle = 10 * time.Second
		st0, c0 := p.TimerStats(), processCPU(b)
		time.Sleep(idle) // measuring idle CPU over a wall-clock period
		st1, c1 := p.TimerStats(), processCPU(b)
		b.ReportMetric((c1-c0).Seconds()/idle.Seconds(), "idle-cpu-s/s")
		b.ReportMetric(float64(st1.Looks-st0.Looks), "looks")
		b.ReportMetric(float64(st1.KeysRead-st0.KeysRead), "keys-read")

		// Ten keys get a wall timer due in 3 s (set through pings).
		due := time.Now().Add(3 * time.Second)
		for i := range 10 {
			k := fmt.Sprintf("device-%07d", i*(keys/10))
			ping, _ := codecs.For[testpb.Ping]().Marshal(&testpb.Ping{DeviceId: k, DeviceTimeMs: due.UnixMilli()})
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topicIn, Key: []byte(k), Value: ping}).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		embeddedtest.ConsumeUntil(b, cl, topicOut, func(rs []*kgo.Record) bool { return len(rs) >= 10 })
		b.ReportMetric(time.Since(due).Seconds(), "s-late-10th")
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
