package group_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// indexedMember runs the timer group against a broker: a ping with Lat 3
// cancels the key's "wall" timer, Lat 4 moves it to base+2h; every firing
// emits a trigger named after the timer. Its own looks are an hour apart:
// the test looks (FireTimers) when it wants.
type indexedMember struct {
	proc   *group.Processor
	cancel context.CancelFunc
	done   chan error
}

type wallClock struct {
	mu sync.Mutex
	at time.Time
}

func (w *wallClock) now() time.Time  { w.mu.Lock(); defer w.mu.Unlock(); return w.at }
func (w *wallClock) set(t time.Time) { w.mu.Lock(); w.at = t; w.mu.Unlock() }

func startIndexed(t *testing.T, cl cluster.Config, dir string, wall *wallClock) *indexedMember {
	t.Helper()
	g := group.New[state](timerTopology(rebalanceParts), testGroup, quiet)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		switch p.GetLat() {
		case 3:
			c.CancelTimer("wall")
		case 4:
			return c.SetTimer("wall", time.UnixMilli(base).Add(2*time.Hour), group.WallClock)
		}
		return nil
	})
	fired := group.Output[testpb.Trigger](g, topicOut)
	group.OnTimer(g, func(c *ctxT, tm group.Timer) error {
		fired.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), FenceId: tm.Name, EventTimeMs: tm.At.UnixMilli()})
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	p, err := g.Processor(ctx, cl, group.StateDir(dir), group.Clock(wall.now), group.TimerInterval(time.Hour))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m := &indexedMember{proc: p, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- p.Run(ctx) }()
	t.Cleanup(m.stop)
	return m
}

func (m *indexedMember) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
		m.cancel = nil
	}
}

// look runs one look and returns how many keys it read and ticks it sent.
func (m *indexedMember) look(t *testing.T) (read, sent int64) {
	t.Helper()
	before := m.proc.TimerStats()
	if err := m.proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := m.proc.TimerStats()
	return after.KeysRead - before.KeysRead, after.TicksSent - before.TicksSent
}

// The test: 100,000 keys hold timers, and a look's cost does not
// grow with them. The keys arrive as the table's changelog (as after a crash
// with an empty disk); each partition's index is built once from its store
// when it has recovered. A look with nothing due reads no key; with 10 due it
// reads 10. After a restart on the same state directory (a warm store) the
// index is built again from the store, and a timer cancelled or moved before
// the restart is not fired at its old time.
func TestTimerIndexIsBuiltFromTheStoreAndLooksCostTheDueKeys(t *testing.T) {
	const keys, withWall = 100_000, 10
	cl := embeddedtest.Cluster(t)
	if _, err := group.CheckBroker(context.Background(), cl, timerTopology(rebalanceParts), true); err != nil {
		t.Fatal(err)
	}
	prod := embeddedtest.Client(t, cl, kgo.ProducerBatchMaxBytes(1<<20))
	var wallKeys []string
	recs := make([]*kgo.Record, 0, keys)
	for i := range keys {
		key := fmt.Sprintf("k%06d", i)
		env := &kitpb.Envelope{Timers: []*kitpb.Timer{{Name: "silence", AtMs: base + time.Hour.Milliseconds(), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}}
		if i%(keys/withWall) == 0 {
			env.Timers = append(env.Timers, &kitpb.Timer{Name: "wall", AtMs: base + 30*time.Minute.Milliseconds(), Kind: kitpb.TimerKind_TIMER_KIND_WALL})
			wallKeys = append(wallKeys, key)
		}
		v, err := group.EncodeEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topicTab, Key: []byte(key), Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wall := &wallClock{at: time.UnixMilli(base)}
	dir := t.TempDir()
	indexed := func(m *indexedMember) func() bool {
		return func() bool {
			st := m.proc.TimerStats()
			return st.Rebuilds == rebalanceParts && st.Indexed == keys
		}
	}

	a := startIndexed(t, cl, dir, wall)
	waitFor(t, "every partition's index built from the recovered table", 2*time.Minute, indexed(a))
	for range 3 {
		if read, sent := a.look(t); read != 0 || sent != 0 {
			t.Fatalf("a look with %d keys and nothing due read %d keys and sent %d ticks; want 0", keys, read, sent)
		}
	}
	// Before the restart: cancel one key's wall timer and move another's.
	cancelled, moved := wallKeys[0], wallKeys[1]
	for key, lat := range map[string]float64{cancelled: 3, moved: 4} {
		ping, _ := codecs.For[testpb.Ping]().Marshal(&testpb.Ping{DeviceId: key, Lat: lat})
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topicIn, Key: []byte(key), Value: ping}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both pings applied", time.Minute, func() bool { n, _ := a.proc.Processed(topicIn); return n == 2 })
	a.stop()

	b := startIndexed(t, cl, dir, wall)
	waitFor(t, "every partition's index rebuilt after the restart", 2*time.Minute, indexed(b))
	if read, sent := b.look(t); read != 0 || sent != 0 {
		t.Fatalf("after the restart a look with nothing due read %d keys, sent %d ticks", read, sent)
	}
	wall.set(time.UnixMilli(base).Add(31 * time.Minute))
	if read, sent := b.look(t); read != withWall-2 || sent != withWall-2 {
		t.Fatalf("a look with %d due read %d keys and sent %d ticks", withWall-2, read, sent)
	}
	want := slices.DeleteFunc(slices.Clone(wallKeys), func(k string) bool { return k == cancelled || k == moved })
	var got []string
	embeddedtest.ConsumeUntil(t, cl, topicOut, func(rs []*kgo.Record) bool {
		got = got[:0]
		for _, r := range rs {
			got = append(got, string(r.Key))
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("fired for %v, want %v (not the cancelled %s nor the moved %s)", got, want, cancelled, moved)
	}
	if read, _ := b.look(t); read != 0 {
		t.Fatalf("after firing, a look read %d keys", read)
	}
}

// When a member leaves, the survivor takes its partitions over, builds their
// index from the stores it recovers, and fires their timers: none is lost
// with the member that held them.
func TestTimerIndexFollowsPartitionsToTheSurvivor(t *testing.T) {
	const keys = 2_000
	cl := embeddedtest.Cluster(t)
	if _, err := group.CheckBroker(context.Background(), cl, timerTopology(rebalanceParts), true); err != nil {
		t.Fatal(err)
	}
	prod := embeddedtest.Client(t, cl)
	recs := make([]*kgo.Record, 0, keys)
	for i := range keys {
		v, err := group.EncodeEnvelope(&kitpb.Envelope{Timers: []*kitpb.Timer{{Name: "wall", AtMs: base + 30*time.Minute.Milliseconds(), Kind: kitpb.TimerKind_TIMER_KIND_WALL}}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topicTab, Key: []byte(fmt.Sprintf("k%05d", i)), Value: v})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wall := &wallClock{at: time.UnixMilli(base)}
	a, b := startIndexed(t, cl, t.TempDir(), wall), startIndexed(t, cl, t.TempDir(), wall)
	waitFor(t, "both members own partitions and index them", 2*time.Minute, func() bool {
		na, nb := len(activeParts(a.proc)), len(activeParts(b.proc))
		ia, ib := a.proc.TimerStats().Indexed, b.proc.TimerStats().Indexed
		return na > 0 && nb > 0 && na+nb == rebalanceParts && ia > 0 && ib > 0 && ia+ib == keys
	})
	b.stop()
	waitFor(t, "the survivor indexes every partition", 2*time.Minute, func() bool {
		return len(activeParts(a.proc)) == rebalanceParts && a.proc.TimerStats().Indexed == keys
	})
	wall.set(time.UnixMilli(base).Add(31 * time.Minute))
	// The look sends the first batch of each partition; the rest follow as
	// refills while the ticks are handled (its next look is an hour away).
	if read, sent := a.look(t); read != sent || sent != rebalanceParts*group.DefaultTimerBatch {
		t.Fatalf("the survivor's look read %d keys and sent %d ticks, want a batch per partition (%d)", read, sent, rebalanceParts*group.DefaultTimerBatch)
	}
	seen := map[string]bool{}
	embeddedtest.ConsumeUntil(t, cl, topicOut, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			seen[string(r.Key)] = true
		}
		return len(seen) == keys
	})
}
