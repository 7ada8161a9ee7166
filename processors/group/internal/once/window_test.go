package once

import (
	"testing"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestTrimKeepsUncommitted: against a broker (capped false) the window never
// drops an input at or above the committed offset, whose outputs may not be
// acknowledged; the committed offset drops what is below it. Capped (Goka's
// tester) or with commits unknown, the window drops the oldest.
func TestTrimKeepsUncommitted(t *testing.T) {
	const window, n = 4, 10
	build := func(committed Committed, capped bool) *kitpb.Cursor {
		env := &kitpb.Envelope{}
		for off := range int64(n) {
			Advance(env, Input{Topic: "in", Partition: 0, Offset: off}, "k", []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte{byte(off)}}})
			Bounds{Window: window, Committed: committed, Waits: !capped}.Trim(env)
		}
		return CursorOf(env, "in", 0)
	}
	at := func(next int64, ok bool) Committed {
		return func(string, int32) (int64, bool) { return next, ok }
	}
	for _, tc := range []struct {
		name      string
		committed Committed
		capped    bool
		kept      int // inputs remembered, head included, each with its output
	}{
		{"nothing committed", at(0, true), false, n},
		{"committed up to 6", at(6, true), false, n - 6},
		{"commits unknown", at(0, false), false, window},
		{"capped", at(0, true), true, window},
		{"capped, committed up to 8", at(8, true), true, n - 8},
	} {
		c := build(tc.committed, tc.capped)
		if got := 1 + len(c.GetPending()); got != tc.kept {
			t.Errorf("%s: %d inputs remembered, want %d", tc.name, got, tc.kept)
		}
		if got := len(c.GetSent()); got != tc.kept {
			t.Errorf("%s: outputs of %d inputs kept, want %d", tc.name, got, tc.kept)
		}
	}
}

// TestTrimForgetsOnlyOutputLess: beyond the window, uncapped, an input with
// no outputs is forgotten (nothing to re-emit), one with outputs is not; and
// the window is full (awaitRoom waits) only with window inputs with outputs.
func TestTrimForgetsOnlyOutputLess(t *testing.T) {
	const window, n = 4, 12
	env := &kitpb.Envelope{}
	nothing := func(string, int32) (int64, bool) { return 0, true }
	for off := range int64(n) {
		var outs []*kitpb.Output
		if off%3 == 0 { // 0, 3, 6, 9
			outs = []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte{byte(off)}}}
		}
		Advance(env, Input{Topic: "in", Partition: 0, Offset: off}, "k", outs)
		Bounds{Window: window, Committed: nothing, Waits: true}.Trim(env)
	}
	c := CursorOf(env, "in", 0)
	if got := len(c.GetSent()); got != 4 {
		t.Errorf("outputs of %d inputs kept, want all 4 that had any", got)
	}
	// head 11, the 3 newest (10, 9, 8) and the older ones with outputs (6, 3, 0).
	if got := 1 + len(c.GetPending()); got != 7 {
		t.Errorf("%d inputs remembered, want 7 (pending %v)", got, c.GetPending())
	}
	waits := Bounds{Window: window, Committed: nothing, Waits: true}
	if oldest, _, full := waits.Full(c); !full || oldest != 0 {
		t.Errorf("Full = %d, %v; want 0, true (4 uncommitted inputs with outputs)", oldest, full)
	}
	waits.Committed = func(string, int32) (int64, bool) { return 1, true }
	if _, _, full := waits.Full(c); full {
		t.Error("window full with the oldest committed")
	}
}
