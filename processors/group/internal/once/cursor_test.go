package once

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Without commit information the cursor remembers the last window inputs and
// forgets the older ones, with their outputs.
func TestAdvanceKeepsTheWindow(t *testing.T) {
	env := &kitpb.Envelope{}
	out := []*kitpb.Output{{Topic: "t", Key: "k"}}
	for _, off := range []int64{10, 20, 30, 40, 50} {
		Advance(env, Input{Topic: "pings", Partition: 1, Offset: off}, "k", out)
		Bounds{Window: 4}.Trim(env)
	}
	c := CursorOf(env, "pings", 1)
	for off, want := range map[int64]bool{50: true, 40: true, 30: true, 20: true, 10: false} {
		if got := Remembered(c, uint64(50-off)); got != want {
			t.Errorf("Remembered(%d) = %v, want %v (cursor %v)", off, got, want, c)
		}
		if got := RecordedAt(c, uint64(50-off)) != nil; got != want {
			t.Errorf("recorded(%d) = %v, want %v (cursor %v)", off, got, want, c)
		}
	}
	if len(env.GetSent()) != 0 {
		t.Errorf("legacy outputs written: %v", env.GetSent())
	}
	if k := RecordedAt(c, 0).GetOutputs()[0].GetKey(); k != "" {
		t.Errorf("output keyed like the input stored with key %q, want it left out", k)
	}
}

// With the committed offset known the cursor remembers only the inputs at or
// above it: what can be redelivered. The head's outputs go once it is
// committed too (at the key's next write, of any input partition).
func TestTrimKeepsWhatCanBeRedelivered(t *testing.T) {
	env := &kitpb.Envelope{}
	out := []*kitpb.Output{{Topic: "t", Key: "other"}}
	next := map[string]int64{}
	committed := func(topic string, _ int32) (int64, bool) { n, ok := next[topic]; return n, ok }
	for _, off := range []int64{10, 20, 30, 40, 50} {
		Advance(env, Input{Topic: "pings", Partition: 1, Offset: off, Ordered: true, Seq: uint64(off) << 16, Digest: uint64(off)}, "k", out)
		Bounds{Window: 32, Committed: committed}.Trim(env)
	}
	c := CursorOf(env, "pings", 1)
	if len(c.GetPending()) != 4 || len(c.GetSent()) != 5 {
		t.Fatalf("commits unknown: pending %v, %d recorded; want all 5 inputs", c.GetPending(), len(c.GetSent()))
	}
	next["pings"] = 30 // 10 and 20 are committed
	Bounds{Window: 32, Committed: committed}.Trim(env)
	if !slices.Equal(c.GetPending(), []uint64{10, 20}) || len(c.GetSent()) != 3 || RecordedAt(c, 30) != nil {
		t.Errorf("committed up to 30: pending %v, recorded %v; want 40 and 30 pending, 3 recorded", c.GetPending(), c.GetSent())
	}
	next["pings"] = 51
	Advance(env, Input{Topic: "timers", Partition: 1, Offset: 7}, "k", nil) // another partition's write trims this one
	Bounds{Window: 32, Committed: committed}.Trim(env)
	if len(c.GetPending()) != 0 || len(c.GetSent()) != 0 || c.GetOffset() != 50 || c.GetSeq() != 50<<16 || c.GetDigest() != 50 {
		t.Errorf("all committed: cursor %v; want the position alone", c)
	}
	if got := RecordedAt(c, 0); got != nil {
		t.Errorf("head's outputs kept after its commit: %v", got)
	}
}

// Envelopes written before cursors held their outputs (testdata, frozen) still
// decode, and their replay memory still answers until it is migrated.
func TestLegacyEnvelopeStillDecodes(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/envelope-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	env, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !env.GetHasState() || len(env.GetState()) == 0 {
		t.Fatalf("no state in %v", env)
	}
	if len(env.GetTimers()) != 1 || env.GetTimers()[0].GetName() != "silence" {
		t.Errorf("timers %v", env.GetTimers())
	}
	pings := CursorOf(env, "pings", 7)
	// Ordered inputs at offsets 100..112 (3 apart), HLC 1<<40 + i<<16; outputs of i = 2, 4.
	for i, want := range []bool{false, false, true, false, true} {
		hlcv := uint64(1<<40 + i*65536)
		if !Applied(pings, int64(100+3*i), hlcv, true) {
			t.Errorf("input %d not applied", i)
		}
		if got := SentFor(env, "pings", 7, hlcv) != nil; got != want {
			t.Errorf("input %d: legacy outputs found %v, want %v", i, got, want)
		}
	}
	// The unordered timer cursor migrates exactly on its next input.
	Advance(env, Input{Topic: "debouncer-timers", Partition: 7, Offset: 30}, "veh-000123", nil)
	Bounds{Window: 4}.Trim(env)
	timers := CursorOf(env, "debouncer-timers", 7)
	if !slices.Equal(timers.GetPending(), []uint64{8, 9, 10}) || len(timers.GetSent()) != 3 || RecordedAt(timers, 8) == nil || RecordedAt(timers, 10) == nil {
		t.Errorf("migrated timer cursor %v", timers)
	}
	if got := RecordedAt(timers, 9).GetOutputs()[0].GetValue(); !bytes.Equal(got, []byte{9, 1}) {
		t.Errorf("migrated output of offset 21: %v", got)
	}
	for _, s := range env.GetSent() {
		if s.GetTopic() == "debouncer-timers" {
			t.Errorf("legacy output left after migration: %v", s)
		}
	}
	if SentFor(env, "pings", 7, 1<<40+4*65536) == nil {
		t.Errorf("the ordered cursor's legacy outputs went with another cursor's migration")
	}
}
