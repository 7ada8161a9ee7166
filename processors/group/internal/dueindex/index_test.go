package dueindex

import (
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
)

// model is what the index must agree with: each key's timers.
type model map[string][]*kitpb.Timer

// isDue is when the kit fires a timer (timers.go's isDue): its clock has
// reached it.
func isDue(t *kitpb.Timer, streamMs, wallMs int64) bool {
	switch t.GetKind() {
	case kitpb.TimerKind_TIMER_KIND_STREAM:
		return t.GetAtMs() <= streamMs
	case kitpb.TimerKind_TIMER_KIND_WALL:
		return t.GetAtMs() <= wallMs
	}
	return false
}

func (m model) Due(streamMs, wallMs int64) []string {
	var out []string
	for k, ts := range m {
		for _, t := range ts {
			if isDue(t, streamMs, wallMs) {
				out = append(out, k)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// The index against a model under random sets, moves, cancels, removals and
// Looks: a look returns exactly the keys with a due timer (each once until
// its tick is handled), and a lost tick is sent again.
func TestTimerIndexAgreesWithTheTimers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pt, m := NewPart(), model{}
	for round := range 2000 {
		for range 20 {
			k := fmt.Sprintf("k%d", r.IntN(200))
			switch r.IntN(5) {
			case 0:
				pt.Remove(k)
				delete(m, k)
			case 1:
				pt.Set(k, nil)
				delete(m, k)
			default:
				var ts []*kitpb.Timer
				for i := range r.IntN(3) + 1 {
					ts = append(ts, &kitpb.Timer{Name: fmt.Sprint(i), AtMs: int64(r.IntN(1000)), Kind: kitpb.TimerKind(1 + r.IntN(2))})
				}
				pt.Set(k, ts)
				m[k] = ts
			}
		}
		streamMs, wallMs := int64(r.IntN(1000)), int64(r.IntN(1000))
		got, read := pt.Due(streamMs, wallMs, int64(round+1), 0, 1<<30, false)
		slices.Sort(got)
		want := m.Due(streamMs, wallMs)
		if !slices.Equal(got, want) || read != len(want) {
			t.Fatalf("round %d: due %v (read %d), want %v", round, got, read, want)
		}
		if again, _ := pt.Due(streamMs, wallMs, int64(round+1), 0, 1<<30, false); len(again) != 0 {
			t.Fatalf("round %d: ticks in flight sent again at once: %v", round, again)
		}
		// Half the ticks are handled (the handler fires the due timers);
		// the other half are lost and sent again once overdue.
		for i, k := range got {
			if i%2 == 1 {
				continue
			}
			kept := slices.DeleteFunc(slices.Clone(m[k]), func(t *kitpb.Timer) bool { return isDue(t, streamMs, wallMs) })
			m[k] = kept
			pt.Set(k, kept)
			pt.Handled(k)
			if len(kept) == 0 {
				delete(m, k)
			}
		}
		lost, _ := pt.Due(streamMs, wallMs, int64(round+2), int64(round+1), 1<<30, false)
		slices.Sort(lost)
		if want := m.Due(streamMs, wallMs); !slices.Equal(lost, want) {
			t.Fatalf("round %d: resent %v, want %v", round, lost, want)
		}
		for _, k := range lost {
			pt.Handled(k)
		}
		if pt.Size() != len(m) {
			t.Fatalf("round %d: index holds %d keys, model %d", round, pt.Size(), len(m))
		}
	}
}

func TestTimerIndexBatchBoundsTicksInFlight(t *testing.T) {
	pt := NewPart()
	for i := range 10 {
		pt.Set(fmt.Sprint(i), []*kitpb.Timer{{AtMs: int64(i), Kind: kitpb.TimerKind_TIMER_KIND_WALL}})
	}
	first, _ := pt.Due(0, 100, 1, 0, 4, false)
	if len(first) != 4 {
		t.Fatalf("first look sent %d, batch 4", len(first))
	}
	if more, _ := pt.Due(0, 100, 1, 0, 4, false); len(more) != 0 {
		t.Fatalf("sent %v with 4 in flight", more)
	}
	pt.Handled(first[0])
	pt.Set(first[0], nil)
	if more, _ := pt.Due(0, 100, 1, 0, 4, false); len(more) != 1 || more[0] != "4" {
		t.Fatalf("after one handled: %v, want [4]", more)
	}
}

func TestEnvelopeDueReadsOnlyTheTimers(t *testing.T) {
	env := &kitpb.Envelope{State: []byte("state"), HasState: true,
		Cursors: []*kitpb.Cursor{{Topic: "in", Partition: 3, Offset: 9, Seq: 9, Recent: []uint64{1, 2}}},
		Sent:    []*kitpb.Sent{{Topic: "in", Partition: 3, Seq: 9, Outputs: []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte("v")}}}},
		Timers: []*kitpb.Timer{{Name: "a", AtMs: 50, Kind: kitpb.TimerKind_TIMER_KIND_STREAM}, {Name: "b", AtMs: 20, Kind: kitpb.TimerKind_TIMER_KIND_STREAM},
			{Name: "c", AtMs: 70, Kind: kitpb.TimerKind_TIMER_KIND_WALL}}}
	b, err := tablecodec.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	due, ok, err := envelopeDue(b)
	if err != nil || !ok || due != [2]int64{20, 70} {
		t.Fatalf("due %v ok %v err %v", due, ok, err)
	}
	if _, ok, err := envelopeDue([]byte("bare state")); err != nil || ok {
		t.Fatalf("bare state: ok %v err %v", ok, err)
	}
	if _, _, err := envelopeDue(append(append([]byte(nil), tablecodec.Magic...), 0xff)); err == nil {
		t.Fatal("a broken envelope read without error")
	}
}

// benchIndex is a partition index of n keys, each with one stream timer not
// due before an hour (a fleet of devices each waiting for its silence).
func benchIndex(n int) *Part {
	pt := NewPart()
	for i := range n {
		pt.Set(fmt.Sprintf("device-%07d", i), []*kitpb.Timer{{Name: "silence", AtMs: time.Hour.Milliseconds() + int64(i), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}})
	}
	return pt
}

const benchKeys = 1_000_000

// batch is the kit's DefaultTimerBatch: one look's ticks per partition.
const batch = 256

// BenchmarkTimerIndex: the due-time index at 1,000,000 keys with a timer each.
//   - idle-look: a look with nothing due (what every TimerInterval costs);
//   - move: one key's timer moved (what a ping that re-arms its silence
//     timer adds to its commit);
//   - burst-look: one look's batch (batch ticks) out of
//     1,000,000 due at once, the longest the look holds a partition's index;
//   - rebuild: building the index from a store (per key), at assignment.
//
// bytes/key is the heap the index holds per key, from the runtime's counts.
func BenchmarkTimerIndex(b *testing.B) {
	b.Run("idle-look", func(b *testing.B) {
		pt := benchIndex(benchKeys)
		c0 := cpuNs(b)
		for b.Loop() {
			if keys, _ := pt.Due(0, 0, 1, 0, batch, false); len(keys) != 0 {
				b.Fatal("due")
			}
		}
		b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("move", func(b *testing.B) {
		pt := benchIndex(benchKeys)
		r := rand.New(rand.NewPCG(1, 2))
		ts := []*kitpb.Timer{{Name: "silence", Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}
		keys := make([]string, 1<<16)
		for j := range keys {
			keys[j] = fmt.Sprintf("device-%07d", r.IntN(benchKeys))
		}
		i := 0
		c0 := cpuNs(b)
		for b.Loop() {
			ts[0].AtMs = 2*time.Hour.Milliseconds() + int64(i)
			pt.Set(keys[i&(len(keys)-1)], ts)
			i++
		}
		b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("burst-look", func(b *testing.B) {
		pt := benchIndex(benchKeys)
		now := int64(2 * time.Hour.Milliseconds())
		var sent []string
		var cpu int64
		for b.Loop() {
			if len(sent) == 0 || pt.Size() == 0 {
				b.StopTimer()
				pt = benchIndex(benchKeys)
				b.StartTimer()
			}
			b.StopTimer()
			for _, k := range sent { // the previous batch was handled
				pt.Set(k, nil)
			}
			b.StartTimer()
			c0 := cpuNs(b)
			sent, _ = pt.Due(now, now, now, 0, batch, false)
			cpu += cpuNs(b) - c0
		}
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("rebuild", func(b *testing.B) {
		sb, err := statestore.Builder(statestore.Memory, "")
		if err != nil {
			b.Fatal(err)
		}
		st, err := sb("bench-table", 0)
		if err != nil {
			b.Fatal(err)
		}
		const n = 100_000
		for i := range n {
			v, _ := tablecodec.Encode(&kitpb.Envelope{State: make([]byte, 94), HasState: true,
				Cursors: []*kitpb.Cursor{{Topic: "pings", Partition: 1, Offset: int64(i), Seq: uint64(i), Recent: make([]uint64, 31)}},
				Timers:  []*kitpb.Timer{{Name: "silence", AtMs: int64(i), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}})
			if err := st.Set(fmt.Sprintf("device-%07d", i), v); err != nil {
				b.Fatal(err)
			}
		}
		c0 := cpuNs(b)
		for b.Loop() {
			if pt, _, _, err := scanTimers(st); err != nil || pt.Size() != n {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N)/n, "cpu-ns/key")
	})
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			pt := benchIndex(benchKeys)
			goruntime.GC()
			goruntime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchKeys, "bytes/key")
			goruntime.KeepAlive(pt)
		}
	})
}

// cpuNs is the process's CPU time so far (user + system), in nanoseconds:
// what a benchmark on a loaded machine can still measure.
func cpuNs(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// A handled tick asks for the partition's next batch once half of the batch
// is handled and only if the last look left due keys behind: one wake per
// batch, and none when nothing more is due (no wake loop while idle).
func TestTimerIndexAsksForARefillAtHalfTheBatch(t *testing.T) {
	pt := NewPart()
	for i := range 6 {
		pt.Set(fmt.Sprint(i), []*kitpb.Timer{{AtMs: int64(i), Kind: kitpb.TimerKind_TIMER_KIND_WALL}})
	}
	handle := func(key string) bool { // as a tick's commit does: set, then handled
		pt.Set(key, nil)
		return pt.Handled(key)
	}
	first, _ := pt.Due(0, 100, 1, 0, 4, false)
	if len(first) != 4 {
		t.Fatalf("first look sent %d, batch 4", len(first))
	}
	if handle(first[0]) {
		t.Fatal("a refill asked for with 3 of 4 in flight")
	}
	if !handle(first[1]) {
		t.Fatal("no refill asked for with 2 of 4 in flight and 2 keys due")
	}
	if handle(first[2]) {
		t.Fatal("a second refill asked for before the first was served")
	}
	next, _ := pt.Due(0, 100, 1, 0, 4, true) // the refill: 1 in flight, 2 due
	if len(next) != 2 || next[0] != "4" || next[1] != "5" {
		t.Fatalf("the refill sent %v, want [4 5]", next)
	}
	for _, key := range append(first[3:], next...) {
		if handle(key) {
			t.Fatalf("a refill asked for on handling %s with nothing more due", key)
		}
	}
	if pt.Size() != 0 || pt.nFlying != 0 {
		t.Fatalf("index holds %d keys, %d in flight; want none", pt.Size(), pt.nFlying)
	}

	// A handler that re-arms its timer in the past is due again at once: a
	// refill does not send it again, the next look does.
	for i := range 4 {
		pt.Set(fmt.Sprint(i), []*kitpb.Timer{{AtMs: int64(i), Kind: kitpb.TimerKind_TIMER_KIND_WALL}})
	}
	first, _ = pt.Due(0, 100, 1, 0, 2, false)
	past := []*kitpb.Timer{{AtMs: -1, Kind: kitpb.TimerKind_TIMER_KIND_WALL}}
	pt.Set(first[0], past)
	if !pt.Handled(first[0]) {
		t.Fatal("no refill asked for with 1 of 2 in flight and 2 keys due")
	}
	pt.Set(first[1], past)
	pt.Handled(first[1])
	if next, _ := pt.Due(0, 100, 1, 0, 2, true); len(next) != 0 {
		t.Fatalf("the refill sent %v: keys it sent since the last look", next)
	}
	if next, _ := pt.Due(0, 100, 1, 0, 2, false); len(next) != 2 || next[0] != first[0] {
		t.Fatalf("the next look sent %v, want the re-armed keys first", next)
	}
}

// The scan that builds a partition's index reads each envelope's stream time
// too (field 6), without decoding the rest; the kit restores a partition's
// clock from it.
func TestScanReadsTheEnvelopesStreamTime(t *testing.T) {
	b, err := tablecodec.Encode(&kitpb.Envelope{State: []byte("s"), HasState: true, StreamMs: 1234,
		Timers: []*kitpb.Timer{{Name: "a", AtMs: 20, Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}})
	if err != nil {
		t.Fatal(err)
	}
	due, ok, ms, err := envelopeScan(b)
	if err != nil || !ok || due[0] != 20 || ms != 1234 {
		t.Fatalf("due %v ok %v stream %d err %v; want 20, true, 1234", due, ok, ms, err)
	}
}
