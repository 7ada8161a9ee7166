package group_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// Issue 16 item 1: many timers due at once do not hold a partition's input
// back. 2,000 keys of one partition (the old default batch) are due at once,
// with a batch of 64;
// one look is made, and a ping is sent once the first timer has fired. The
// ping must be applied before most of the burst's timers have fired: only a
// small batch of ticks is in flight ahead of it, and the rest are sent as those are handled
// (refills), not by the next look, which is an hour away. Every timer still
// fires exactly once, from one tick each.
func TestTimerBurstDoesNotQueueAheadOfInput(t *testing.T) {
	const keys = 2000
	cl := embeddedtest.Cluster(t)
	if _, err := group.CheckBroker(context.Background(), cl, timerTopology(1), true); err != nil {
		t.Fatal(err)
	}
	prod := embeddedtest.Client(t, cl, kgo.ProducerBatchMaxBytes(1<<20))
	recs := make([]*kgo.Record, 0, keys)
	for i := range keys {
		v, err := group.EncodeEnvelope(&kitpb.Envelope{Timers: []*kitpb.Timer{{Name: "wall", AtMs: base + int64(i), Kind: kitpb.TimerKind_TIMER_KIND_WALL}}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topicTab, Key: []byte(fmt.Sprintf("k%05d", i)), Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var (
		fired        atomic.Int64
		firedAtPing  atomic.Int64
		mu           sync.Mutex
		firedPerKey  = map[string]int{}
		pingsApplied atomic.Int64
	)
	firedAtPing.Store(-1)
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		firedAtPing.Store(fired.Load()) // one partition: timers fire in this goroutine
		pingsApplied.Add(1)
		return nil
	})
	out := group.Output[testpb.Trigger](g, topicOut)
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name, EventTimeMs: tm.At.UnixMilli()})
		fired.Add(1)
		mu.Lock()
		firedPerKey[c.Key()]++
		mu.Unlock()
		return nil
	})
	wall := &wallClock{at: time.UnixMilli(base)}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := g.Processor(ctx, cl, group.StateDir(t.TempDir()), group.Clock(wall.now), group.TimerInterval(time.Hour),
		group.TimerBatch(64)) // well below keys/2 whatever the default, so the bound below has margin
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the partition's index built", 2*time.Minute, func() bool { return p.TimerStats().Indexed == keys })

	wall.set(time.UnixMilli(base).Add(time.Hour)) // every timer is due
	if err := p.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The ping is sent once the burst is being applied, so whatever ticks
	// are then queued for the partition (sent, fetched) are ahead of it.
	waitFor(t, "the burst's first timer fired", time.Minute, func() bool { return fired.Load() > 0 })
	ping, _ := codecs.For[testpb.Ping]().Marshal(&testpb.Ping{DeviceId: "ping"})
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topicIn, Key: []byte("ping"), Value: ping}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every timer fired and the ping applied", 2*time.Minute, func() bool {
		return fired.Load() >= keys && pingsApplied.Load() == 1
	})

	if n := firedAtPing.Load(); n < 0 || n >= keys/2 {
		t.Errorf("the ping was applied after %d of the %d timers had fired: the burst's ticks queued ahead of it", n, keys)
	}
	st := p.TimerStats()
	if st.Looks != 1 || st.Refills == 0 {
		t.Errorf("looks %d, refills %d: want the one look and the rest sent as refills", st.Looks, st.Refills)
	}
	if st.TicksSent != keys {
		t.Errorf("%d ticks sent for %d due keys: a key was sent more than one", st.TicksSent, keys)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range keys {
		if k := fmt.Sprintf("k%05d", i); firedPerKey[k] != 1 {
			t.Errorf("%s fired %d times", k, firedPerKey[k])
		}
	}
	if n := fired.Load(); n != keys {
		t.Errorf("%d firings for %d timers", n, keys)
	}
	t.Logf("the ping was applied after %d of %d timers fired; %d refills", firedAtPing.Load(), keys, st.Refills)
}
