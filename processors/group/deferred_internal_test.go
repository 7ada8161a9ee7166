package group

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
	var d deferredWrites
	base := envPrint(stored())
	for i, off := range []int64{11, 12, 14} {
		if !d.add(1, "k", base, &deferredAdvance{topic: "in", partition: 1, offset: off, outputs: out(string(rune('a' + i)))}, 32, nil) {
			t.Fatalf("advance at %d not deferred", off)
		}
	}
	env := stored()
	if got := d.apply(1, "k", env); got != base {
		t.Fatalf("apply = %d, want the stored print %d", got, base)
	}
	c := cursorOf(env, "in", 1)
	if c.GetOffset() != 14 || len(c.GetSent()) != 3 || recordedAt(c, 2) == nil || string(recordedAt(c, 2).GetOutputs()[0].GetValue()) != "b" {
		t.Fatalf("cursor after apply: %v", c)
	}
	if d.apply(1, "other", stored()) != 0 || d.apply(2, "k", stored()) != 0 {
		t.Fatal("advances applied to another key or partition")
	}

	// Another writer moved the cursor: the store knows better.
	moved := stored()
	moved.Cursors[0].Offset = 20
	if d.apply(1, "k", moved) != 0 || d.apply(1, "k", stored()) != 0 {
		t.Fatal("advances applied to an envelope they were not deferred on")
	}
	if p := d.parts[1]; p.live != 0 || len(p.keys) != 0 {
		t.Fatalf("dropped advances still counted: live %d, keys %d", p.live, len(p.keys))
	}

	// Committed inputs cannot be redelivered: dropped at the next add.
	for _, off := range []int64{11, 12} {
		d.add(1, "k", base, &deferredAdvance{topic: "in", partition: 1, offset: off, outputs: out("x")}, 32, nil)
	}
	committed := func(string, int32) (int64, bool) { return 12, true }
	d.add(1, "j", base, &deferredAdvance{topic: "in", partition: 1, offset: 13, outputs: out("y")}, 32, committed)
	if k := d.parts[1].keys["k"]; k == nil || len(k.entries) != 1 || k.entries[0].offset != 12 || d.parts[1].live != 2 {
		t.Fatalf("after the commit of 11: %+v, live %d", k, d.parts[1].live)
	}

	// A key with window-1 deferred writes.
	var w deferredWrites
	for i := range 3 {
		ok := w.add(0, "k", base, &deferredAdvance{topic: "in", partition: 0, offset: int64(11 + i)}, 3, nil)
		if ok != (i < 2) {
			t.Fatalf("advance %d deferred = %v with a window of 3", i, ok)
		}
	}
	w.written(0, "k")
	if w.parts[0].live != 0 || w.apply(0, "k", stored()) != 0 {
		t.Fatal("a write left its key's advances deferred")
	}
}
