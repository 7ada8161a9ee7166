package windows_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"

	"github.com/lovoo/goka/tester"
)

// detInput is the determinism test's input: 10,000 pings of 200 keys, stream
// time moving 0-40 ms a record, most records up to 4 s behind it (hopping
// windows of 10 s every 5 s with 3 s of grace: some of those are late for
// one of their windows), 2% 20 s behind (late), and a last record far ahead
// that closes every window. Event times lie in the past, so stream time never
// meets the wall clock.
// Under the race detector the input is 2,000 records (the tests' bounds scale).
func detInput() []*testpb.Ping {
	r := rand.New(rand.NewPCG(19, 19))
	now := int64(1_700_000_000_000)
	var in []*testpb.Ping
	for i := range detRecords() - 1 {
		now += r.Int64N(41)
		at := now - r.Int64N(4000)
		if r.IntN(50) == 0 {
			at = now - 20_000
		}
		key := fmt.Sprintf("k%03d", r.IntN(200))
		in = append(in, &testpb.Ping{DeviceId: key, Lat: float64(r.IntN(100)), DeviceTimeMs: at, Hlc: uint64(i)})
	}
	return append(in, &testpb.Ping{DeviceId: "k000", DeviceTimeMs: now + time.Hour.Milliseconds()})
}

func detRecords() int {
	if raceOn {
		return 2_000
	}
	return 10_000
}

// detScale scales a bound on the 10,000-record input to detRecords.
func detScale(n int64) int64 { return n * int64(detRecords()) / 10_000 }

var detSpec = windows.Hopping(10*time.Second, 5*time.Second, 3*time.Second)

// detGroup emits each final window as a Trigger (Hlc the count, Lat the sum,
// EventTimeMs the start), and counts late records.
// Kind "sessions": sessions with a gap of 3 s and 2 s of grace; "sliding":
// sliding windows of 5 s with 2 s of grace; otherwise detSpec.
func detGroup(late *atomic.Int64, kind string) *group.Group[kitpb.WindowSet, *kitpb.WindowSet] {
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	emit := func(c *wsCtx, _ *kitpb.WindowSet, win windows.Window[testpb.Ping, *testpb.Ping]) error {
		out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), Hlc: uint64(win.Count), Lat: win.Sum, EventTimeMs: win.Start.UnixMilli(), CatalogueVersion: uint64(win.End.UnixMilli())})
		return nil
	}
	self := func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws }
	var add func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64, fold func(*testpb.Ping)) error
	switch kind {
	case "sessions":
		add = windows.NewSessions(g, "s", windows.SessionWindows(3*time.Second, 2*time.Second), self, nil, emit).Add
	case "sliding":
		sl := windows.NewSliding(g, "sl", windows.SlidingWindows(5*time.Second, 2*time.Second), self, nil, emit)
		add = func(c *wsCtx, st *kitpb.WindowSet, at time.Time, value float64, _ func(*testpb.Ping)) error {
			return sl.Add(c, st, at, value, nil)
		}
	default:
		add = windows.NewWindows(g, "w", detSpec, self, emit).Add
	}
	group.Stream(g, topicIn, func(c *wsCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		if err := add(c, st, c.EventTime(), p.GetLat(), nil); errors.Is(err, windows.ErrLate) {
			late.Add(1)
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	return g
}

// detOutputs is what a run wrote, per key in order.
type detOutputs map[string][][]byte

func (o detOutputs) total() int {
	n := 0
	for _, v := range o {
		n += len(v)
	}
	return n
}

func (o detOutputs) diff(other detOutputs) string {
	keys := map[string]bool{}
	for k := range o {
		keys[k] = true
	}
	for k := range other {
		keys[k] = true
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range sorted {
		a, b := o[k], other[k]
		if len(a) != len(b) {
			return fmt.Sprintf("key %s: %d outputs vs %d", k, len(a), len(b))
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				return fmt.Sprintf("key %s: output %d differs", k, i)
			}
		}
	}
	return ""
}

// runDetTester runs the input under Goka's tester, looking for due timers
// after every `every` records (0: only at the end).
func runDetTester(t *testing.T, in []*testpb.Ping, every int, kind string) (detOutputs, int64) {
	t.Helper()
	tt := tester.New(t)
	var late atomic.Int64
	wall := time.Now()
	proc, err := detGroup(&late, kind).Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	q := tt.NewQueueTracker(topicOut)
	for i, p := range in {
		tt.Consume(topicIn, p.GetDeviceId(), p)
		if every > 0 && i%every == 0 {
			fireTimers(t, tt, proc)
		}
	}
	fireTimers(t, tt, proc)
	got := detOutputs{}
	for k, v, ok := q.Next(); ok; k, v, ok = q.Next() {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v.(*testpb.Trigger))
		if err != nil {
			t.Fatal(err)
		}
		got[k] = append(got[k], b)
	}
	return got, late.Load()
}

// runDetBroker runs the input through the processor on an embedded broker
// with the given TimerInterval until want outputs are written.
func runDetBroker(t *testing.T, in []*testpb.Ping, interval time.Duration, want int) detOutputs {
	t.Helper()
	cl := embeddedtest.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl)
	adm := kadm.NewClient(kc)
	if err := timerTopology(1).Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, len(in))
	for _, p := range in {
		v, _ := proto.Marshal(p)
		recs = append(recs, &kgo.Record{Topic: topicIn, Key: []byte(p.GetDeviceId()), Value: v})
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var late atomic.Int64
	proc, err := detGroup(&late, "").Processor(ctx, cluster.Config{Brokers: cl.Brokers}, group.StateDir(t.TempDir()), group.TimerInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, proc, fmt.Sprintf("timer interval %s", interval), func() bool { return endOffsets(t, adm, topicOut) >= int64(want) })
	got := detOutputs{}
	for _, r := range embeddedtest.ConsumeUntil(t, cl, topicOut, func(r []*kgo.Record) bool { return len(r) >= want }) {
		got[string(r.Key)] = append(got[string(r.Key)], r.Value)
	}
	return got
}

// TestWindowsDeterministic is the "Done when": the same input gives
// byte-identical final windows whenever the timers are looked at — every 25
// records, every 500, only at the end (the tester), and every 10 ms and every
// second (the processor on a broker).
func TestWindowsDeterministic(t *testing.T) {
	in := detInput()
	ref, late := runDetTester(t, in, 0, "")
	if int64(ref.total()) < detScale(2000) || late < detScale(100) {
		t.Fatalf("input too tame: %d windows, %d late records", ref.total(), late)
	}
	t.Logf("%d final windows, %d late records", ref.total(), late)
	for _, every := range []int{25, 500} {
		got, gotLate := runDetTester(t, in, every, "")
		if d := ref.diff(got); d != "" || gotLate != late {
			t.Errorf("timers every %d records: %s (late %d, want %d)", every, d, gotLate, late)
		}
	}
	if testing.Short() {
		t.Skip("broker runs")
	}
	for _, interval := range []time.Duration{10 * time.Millisecond, time.Second} {
		got := runDetBroker(t, in, interval, ref.total())
		if d := ref.diff(got); d != "" {
			t.Errorf("processor, timer interval %s: %s", interval, d)
		}
	}
}

// TestSessionsAndSlidingDeterministic: the same for session and sliding
// windows, on the tester.
func TestSessionsAndSlidingDeterministic(t *testing.T) {
	in := detInput()
	for _, kind := range []string{"sessions", "sliding"} {
		ref, late := runDetTester(t, in, 0, kind)
		if int64(ref.total()) < detScale(1000) || late < detScale(100) {
			t.Fatalf("%s: input too tame: %d windows, %d late records", kind, ref.total(), late)
		}
		t.Logf("%s: %d windows, %d late records", kind, ref.total(), late)
		for _, every := range []int{25, 500} {
			got, gotLate := runDetTester(t, in, every, kind)
			if d := ref.diff(got); d != "" || gotLate != late {
				t.Errorf("%s, timers every %d records: %s (late %d, want %d)", kind, every, d, gotLate, late)
			}
		}
	}
}
