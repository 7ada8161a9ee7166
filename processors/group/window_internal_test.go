package group

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
	build := func(committed committedFunc, capped bool) *kitpb.Cursor {
		env := &kitpb.Envelope{}
		for off := range int64(n) {
			advance(env, "in", 0, off, 0, 0, false, "k", []*kitpb.Output{{Topic: "out", Key: "k", Value: []byte{byte(off)}}})
			trim(env, committed, window, capped)
		}
		return cursorOf(env, "in", 0)
	}
	at := func(next int64, ok bool) committedFunc {
		return func(string, int32) (int64, bool) { return next, ok }
	}
	for _, tc := range []struct {
		name      string
		committed committedFunc
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
