package once

import (
	"testing"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestDeferredAdvances: deferred advances go onto the envelope they were
// deferred on, are dropped when the stored envelope changed under them (another
// writer) and when the group committed their inputs, and a key or partition
// that has too many writes again.
func TestDeferredAdvances(t *testing.T) {
	stored := func() *kitpb.Envelope {
		return &kitpb.Envelope{State: []byte("s"), HasState: true, Cursors: []*kitpb.Cursor{{Topic: "in", Partition: 1, Offset: 10}}}
	}
	out := func(v string) []*kitpb.Output { return []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte(v)}} }
	var d Deferred
	base := Print(stored())
	for i, off := range []int64{11, 12, 14} {
		if !d.Add("k", base, Input{Topic: "in", Partition: 1, Offset: off}, out(string(rune('a'+i))), Bounds{Window: 32}) {
			t.Fatalf("advance at %d not deferred", off)
		}
	}
	env := stored()
	if got := d.Apply(1, "k", env); got != base {
		t.Fatalf("apply = %d, want the stored print %d", got, base)
	}
	c := CursorOf(env, "in", 1)
	if c.GetOffset() != 14 || len(c.GetSent()) != 3 || RecordedAt(c, 2) == nil || string(RecordedAt(c, 2).GetOutputs()[0].GetValue()) != "b" {
		t.Fatalf("cursor after apply: %v", c)
	}
	if d.Apply(1, "other", stored()) != 0 || d.Apply(2, "k", stored()) != 0 {
		t.Fatal("advances applied to another key or partition")
	}

	// Another writer moved the cursor: the store knows better.
	moved := stored()
	moved.Cursors[0].Offset = 20
	if d.Apply(1, "k", moved) != 0 || d.Apply(1, "k", stored()) != 0 {
		t.Fatal("advances applied to an envelope they were not deferred on")
	}
	if p := d.parts[1]; p.live != 0 || len(p.keys) != 0 {
		t.Fatalf("dropped advances still counted: live %d, keys %d", p.live, len(p.keys))
	}

	// Committed inputs cannot be redelivered: dropped at the next add.
	for _, off := range []int64{11, 12} {
		d.Add("k", base, Input{Topic: "in", Partition: 1, Offset: off}, out("x"), Bounds{Window: 32})
	}
	committed := func(string, int32) (int64, bool) { return 12, true }
	d.Add("j", base, Input{Topic: "in", Partition: 1, Offset: 13}, out("y"), Bounds{Window: 32, Committed: committed})
	if k := d.parts[1].keys["k"]; k == nil || len(k.entries) != 1 || k.entries[0].in.Offset != 12 || d.parts[1].live != 2 {
		t.Fatalf("after the commit of 11: %+v, live %d", k, d.parts[1].live)
	}

	// A key with window-1 deferred writes.
	var w Deferred
	for i := range 3 {
		ok := w.Add("k", base, Input{Topic: "in", Partition: 0, Offset: int64(11 + i)}, nil, Bounds{Window: 3})
		if ok != (i < 2) {
			t.Fatalf("advance %d deferred = %v with a window of 3", i, ok)
		}
	}
	w.Written(0, "k")
	if w.parts[0].live != 0 || w.Apply(0, "k", stored()) != 0 {
		t.Fatal("a write left its key's advances deferred")
	}
}
