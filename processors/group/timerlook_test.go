package group_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// seed writes envelopes straight into the tester's store of the table, as a
// partition's local store holds them before its processor starts.
func (h *timerHarness) seed(t *testing.T, envs map[string]*kitpb.Envelope) {
	t.Helper()
	st, err := h.tt.StorageBuilder()(topicTab, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k, env := range envs {
		b, err := group.EncodeEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Set(k, b); err != nil {
			t.Fatal(err)
		}
	}
}

// lookDelta runs one look and returns what it read and sent.
func (h *timerHarness) lookDelta(t *testing.T) (read, sent int64, fired []string) {
	t.Helper()
	before := h.proc.TimerStats()
	fired = h.fire(t)
	after := h.proc.TimerStats()
	return after.KeysRead - before.KeysRead, after.TicksSent - before.TicksSent, fired
}

// A timer moved later or cancelled is not looked at, and not fired, at its
// old time: every write of a key's timers updates the index.
func TestMovedOrCancelledTimerIsNotFiredAtItsOldTime(t *testing.T) {
	h := newTimerHarness(t)
	h.setWall(time.UnixMilli(base).Add(time.Hour)) // stream time is not held back by the wall clock
	h.ping("moved", 0, base)                       // silence at 1m
	h.ping("moved", 0, base+30_000)                // moved to 1m30s
	h.ping("cancel", 0, base)                      // silence at 1m
	h.ping("cancel", 3, base+1)                    // cancelled
	h.ping("clock", 0, base+61_000)                // stream time 1m1s; its own timer at 2m1s
	if read, sent, fired := h.lookDelta(t); read != 0 || sent != 0 || len(fired) != 0 {
		t.Fatalf("at stream time 1m1s a look read %d keys, sent %d ticks, fired %v: the old times are still indexed", read, sent, fired)
	}
	h.ping("clock2", 0, base+91_000) // stream time 1m31s
	if read, _, fired := h.lookDelta(t); read != 1 || strings.Join(fired, ",") != "moved/silence@1m30s" {
		t.Fatalf("read %d, fired %v; want only moved's timer at its new time", read, fired)
	}
	h.ping("clock3", 0, base+10*60_000)
	if _, _, fired := h.lookDelta(t); strings.Join(fired, ",") != "clock/silence@2m1s,clock2/silence@2m31s" {
		t.Fatalf("fired %v; the cancelled timer must never fire", fired)
	}
}

// Many timers due at once go out in batches: a look sends at most
// TimerBatch ticks per partition, and the rest follow as refills once half of
// a batch is handled (under Tester, within the same call), each in due order.
func TestDueBurstIsSentInBatches(t *testing.T) {
	const keys, batch = 250, 100
	h := buildTimerHarness(t, group.TimerBatch(batch))
	envs := map[string]*kitpb.Envelope{}
	for i := range keys {
		envs[fmt.Sprintf("k%03d", i)] = &kitpb.Envelope{Timers: []*kitpb.Timer{
			{Name: "wall", AtMs: base + int64(i), Kind: kitpb.TimerKind_TIMER_KIND_WALL}}}
	}
	h.seed(t, envs)
	h.run(t)
	waitFor(t, "the partition's index built", time.Minute, func() bool { return h.proc.TimerStats().Indexed == keys })
	h.setWall(time.UnixMilli(base).Add(time.Hour))
	before := h.proc.TimerStats()
	_, sent, all := h.lookDelta(t)
	after := h.proc.TimerStats()
	if sent != keys || len(all) != keys {
		t.Fatalf("one look sent %d ticks and fired %d timers, want %d", sent, len(all), keys)
	}
	// 100 by the look, 100 and 50 by two refills: each is asked for at 50 in
	// flight, and under Tester served once the whole batch is handled.
	if looks, refills := after.Looks-before.Looks, after.Refills-before.Refills; looks != 1 || refills != 2 {
		t.Fatalf("%d looks and %d refills, want 1 and 2", looks, refills)
	}
	for i, f := range all {
		if want := fmt.Sprintf("k%03d/wall@", i); !strings.HasPrefix(f, want) {
			t.Fatalf("firing %d was %s, want %s... (due order)", i, f, want)
		}
	}
}
