package once

import (
	"testing"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestCheck is the protocol as a table: a key's history of applied inputs
// (each recorded and trimmed as the kit's commit does), then one input and
// what must become of it.
func TestCheck(t *testing.T) {
	out := func(v string) []*kitpb.Output { return []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte(v)}} }
	at := func(next int64) Committed { return func(string, int32) (int64, bool) { return next, true } }
	type step struct {
		in   Input
		outs []*kitpb.Output
	}
	unordered := func(off int64, outs ...string) step {
		s := step{in: Input{Topic: "in", Partition: 3, Offset: off}}
		for _, o := range outs {
			s.outs = append(s.outs, out(o)...)
		}
		return s
	}
	ordered := func(off int64, seq, digest uint64, outs ...string) step {
		s := unordered(off, outs...)
		s.in.Ordered, s.in.Seq, s.in.Digest = true, seq, digest
		return s
	}
	for _, tc := range []struct {
		name    string
		bounds  Bounds // while the history is applied
		history []step
		// after: the bounds the input is checked under (a restart may know
		// a later commit); zero: bounds.
		after  Bounds
		in     Input
		kind   Kind
		memory Memory
		outs   string // the value of the one output to re-emit, "" none
	}{
		{name: "first input of the key", bounds: Bounds{Window: 4},
			in: unordered(10).in, kind: New},
		{name: "the next offset is new", bounds: Bounds{Window: 4}, history: []step{unordered(10, "a")},
			in: unordered(11).in, kind: New},
		{name: "a gap (other keys' offsets between) is new", bounds: Bounds{Window: 4}, history: []step{unordered(10, "a")},
			in: unordered(500).in, kind: New},
		{name: "the head again is a replay that re-emits", bounds: Bounds{Window: 4}, history: []step{unordered(10, "a"), unordered(12, "b")},
			in: unordered(12).in, kind: Replay, outs: "b"},
		{name: "an earlier applied offset re-emits its own outputs", bounds: Bounds{Window: 4}, history: []step{unordered(10, "a"), unordered(12, "b"), unordered(13)},
			in: unordered(10).in, kind: Replay, outs: "a"},
		{name: "an applied offset that emitted nothing is known to have", bounds: Bounds{Window: 4}, history: []step{unordered(10), unordered(12, "b")},
			in: unordered(10).in, kind: Replay, memory: OutputLess},
		{name: "capped: an offset out of the window is forgotten", bounds: Bounds{Window: 2}, history: []step{unordered(10, "a"), unordered(11, "b"), unordered(12, "c")},
			in: unordered(10).in, kind: Replay, memory: Forgotten},
		{name: "waits: nothing uncommitted with outputs is trimmed", bounds: Bounds{Window: 2, Committed: at(0), Waits: true}, history: []step{unordered(10, "a"), unordered(11, "b"), unordered(12, "c")},
			in: unordered(10).in, kind: Replay, outs: "a"},
		{name: "waits: an output-less offset beyond the window but above the commit had none", bounds: Bounds{Window: 2, Committed: at(0), Waits: true}, history: []step{unordered(10), unordered(11), unordered(12, "c")},
			in: unordered(10).in, kind: Replay, memory: OutputLess},
		{name: "restart: the envelope was trimmed to the commit, a redelivery above it re-emits", bounds: Bounds{Window: 4, Committed: at(12), Waits: true},
			history: []step{unordered(10, "a"), unordered(11, "b"), unordered(12, "c"), unordered(13, "d")},
			in:      unordered(12).in, kind: Replay, outs: "c"},
		{name: "restart: an offset below the commit (an offset reset) is forgotten", bounds: Bounds{Window: 4, Committed: at(12), Waits: true},
			history: []step{unordered(10, "a"), unordered(11, "b"), unordered(12, "c"), unordered(13, "d")},
			in:      unordered(11).in, kind: Replay, memory: Forgotten},
		{name: "the head's outputs go once it is committed: only an offset reset redelivers it", bounds: Bounds{Window: 4, Committed: at(14), Waits: true},
			history: []step{unordered(10, "a"), unordered(13, "d")}, after: Bounds{Window: 4, Committed: at(14), Waits: true},
			in: unordered(13).in, kind: Replay, memory: OutputLess},
		{name: "emit on change: an input never recorded (it changed nothing), redelivered after a later write above the commit, had no outputs", bounds: Bounds{Window: 4, Committed: at(0), Waits: true},
			history: []step{unordered(10, "a"), unordered(12, "c")},
			in:      unordered(11).in, kind: Replay, memory: OutputLess},
		{name: "emit on change: the same, before any later write, is new (and changes nothing again)", bounds: Bounds{Window: 4, Committed: at(0), Waits: true},
			history: []step{unordered(10, "a")},
			in:      unordered(11).in, kind: New},
		{name: "another input partition has its own cursor", bounds: Bounds{Window: 4}, history: []step{unordered(10, "a")},
			in: Input{Topic: "in", Partition: 4, Offset: 10}, kind: New},
		{name: "ordered: a higher HLC at the next offset is new", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(11, 101, 8).in, kind: New},
		{name: "ordered: the applied offset again is a replay", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(10, 100, 7).in, kind: Replay, outs: "a"},
		{name: "ordered: the same record at a new offset is a copy", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(20, 100, 7).in, kind: Copy, outs: "a"},
		{name: "ordered: the last HLC with other bytes is a duplicate", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(20, 100, 9).in, kind: DuplicateHLC},
		{name: "ordered: a lower HLC at a new offset is stale", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(20, 99, 3).in, kind: Stale},
		{name: "ordered: an old offset with a higher HLC is new (offsets started over)", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a")},
			in: ordered(2, 150, 3).in, kind: New},
		{name: "ordered: offsets started over, the old positions are forgotten", bounds: Bounds{Window: 4}, history: []step{ordered(10, 100, 7, "a"), ordered(2, 150, 3, "b")},
			in: ordered(2, 150, 3).in, kind: Replay, outs: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &kitpb.Envelope{}
			for _, s := range tc.history {
				if v := tc.bounds.Check(env, s.in); v.Kind != New {
					t.Fatalf("history input %+v: %v, want it new", s.in, v.Kind)
				}
				tc.bounds.Record(env, s.in, "k", s.outs)
			}
			b := tc.after
			if b.Window == 0 {
				b = tc.bounds
			}
			v := b.Check(env, tc.in)
			if v.Kind != tc.kind {
				t.Fatalf("Check = kind %v, want %v (envelope %v)", v.Kind, tc.kind, env)
			}
			if v.Kind != Replay && v.Kind != Copy {
				return
			}
			if v.Memory != tc.memory {
				t.Fatalf("memory %v, want %v (envelope %v)", v.Memory, tc.memory, env)
			}
			got := ""
			for _, o := range v.Outputs {
				if o.GetKey() != "" {
					t.Errorf("output recorded with the input's key %q, want it left out", o.GetKey())
				}
				got += string(o.GetValue())
			}
			if got != tc.outs {
				t.Errorf("re-emits %q, want %q", got, tc.outs)
			}
		})
	}
}

// TestRecordOnlyMovesForward: recording inputs moves the cursor forward and
// keeps the earlier ones as distances back from it, which is how Check finds
// a replay's outputs.
func TestRecordOnlyMovesForward(t *testing.T) {
	b := Bounds{Window: 4}
	env := &kitpb.Envelope{}
	for _, off := range []int64{10, 11, 12} {
		b.Record(env, Input{Topic: "in", Offset: off}, "k", nil)
	}
	if v := b.Check(env, Input{Topic: "in", Offset: 11}); v.Kind != Replay || v.Back != 1 {
		t.Fatalf("Check(11) = %+v, want a replay 1 back", v)
	}
	c := CursorOf(env, "in", 0)
	if c.GetOffset() != 12 || len(c.GetPending()) != 2 {
		t.Fatalf("cursor %v", c)
	}
}
