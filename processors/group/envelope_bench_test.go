package group

import (
	"bytes"
	"hash/fnv"
	"os"
	"slices"
	"testing"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// BenchmarkStateRoundTrip puts the table-value work of one input side by side:
// bare state (decode, encode: what the kit did before envelopes) against the
// envelope (decode, unwrap, encode the state, advance the cursor with one
// output, encode), for a debouncer-sized state.
func BenchmarkStateRoundTrip(b *testing.B) {
	st := &testpb.DeviceState{DeviceId: "veh-000123", LastHlc: 1 << 40, LastEventTimeMs: 1_800_000_000_000, LastLat: 52.5, LastLon: 13.4, Pings: 812,
		FenceStates: []*testpb.FenceEntry{{FenceId: "zone-mitte-core", State: &testpb.FenceState{Phase: testpb.Phase_PHASE_INSIDE, InsideSinceMs: 1_800_000_000_000}}}}
	bare, _ := marshalOpts.Marshal(st)
	env := &kitpb.Envelope{State: bare, HasState: true}
	for i := range DefaultReplayWindow {
		advance(env, "pings", 7, int64(i), uint64(1<<40+i*65536), 1, true, "veh-000123", nil)
		trim(env, nil, DefaultReplayWindow, true)
	}
	wrapped, _ := encodeEnvelope(env)
	out := []*kitpb.Output{{Topic: "fence-triggers", Key: "veh-000123", Value: make([]byte, 120)}}
	ping := &testpb.Ping{DeviceId: "veh-000123", Lat: 52.51, Lon: 13.41, AccuracyM: 4, DeviceTimeMs: 1_800_000_000_000, Hlc: 1<<41 + 7, SpeedMps: 8.5, HeadingDeg: 90}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s := &testpb.DeviceState{}
			if err := protov2.Unmarshal(bare, s); err != nil {
				b.Fatal(err)
			}
			s.Pings++
			if _, err := marshalOpts.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	// full: the window's cap (commits unknown, or a burst between two
	// commits); lean: the usual case, every earlier input committed.
	for _, tc := range []struct {
		name string
		lean bool
	}{{"envelope-full-window", false}, {"envelope-lean", true}} {
		start := wrapped
		if tc.lean {
			e, _ := decodeEnvelope(wrapped)
			trim(e, func(string, int32) (int64, bool) { return DefaultReplayWindow, true }, DefaultReplayWindow, true)
			start, _ = encodeEnvelope(e)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				e, err := decodeEnvelope(start)
				if err != nil {
					b.Fatal(err)
				}
				s, err := unwrapState[testpb.DeviceState](e)
				if err != nil {
					b.Fatal(err)
				}
				s.Pings++
				if e.State, err = marshalOpts.Marshal(s); err != nil {
					b.Fatal(err)
				}
				// The input's digest, as wrap takes it for an ordered stream.
				pb, _ := marshalOpts.Marshal(ping)
				h := fnv.New64a()
				h.Write(pb)
				off := int64(DefaultReplayWindow + i)
				advance(e, "pings", 7, off, uint64(1<<41+i), h.Sum64(), true, "veh-000123", out)
				committed := func(string, int32) (int64, bool) { return off, tc.lean }
				trim(e, committed, DefaultReplayWindow, true)
				if _, err := encodeEnvelope(e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(start)), "value-B")
		})
	}
}

// Without commit information the cursor remembers the last window inputs and
// forgets the older ones, with their outputs.
func TestAdvanceKeepsTheWindow(t *testing.T) {
	env := &kitpb.Envelope{}
	out := []*kitpb.Output{{Topic: "t", Key: "k"}}
	for _, off := range []int64{10, 20, 30, 40, 50} {
		advance(env, "pings", 1, off, 0, 0, false, "k", out)
		trim(env, nil, 4, true)
	}
	c := cursorOf(env, "pings", 1)
	for off, want := range map[int64]bool{50: true, 40: true, 30: true, 20: true, 10: false} {
		if got := remembered(c, uint64(50-off)); got != want {
			t.Errorf("remembered(%d) = %v, want %v (cursor %v)", off, got, want, c)
		}
		if got := recordedAt(c, uint64(50-off)) != nil; got != want {
			t.Errorf("recorded(%d) = %v, want %v (cursor %v)", off, got, want, c)
		}
	}
	if len(env.GetSent()) != 0 {
		t.Errorf("legacy outputs written: %v", env.GetSent())
	}
	if k := recordedAt(c, 0).GetOutputs()[0].GetKey(); k != "" {
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
		advance(env, "pings", 1, off, uint64(off)<<16, uint64(off), true, "k", out)
		trim(env, committed, 32, true)
	}
	c := cursorOf(env, "pings", 1)
	if len(c.GetPending()) != 4 || len(c.GetSent()) != 5 {
		t.Fatalf("commits unknown: pending %v, %d recorded; want all 5 inputs", c.GetPending(), len(c.GetSent()))
	}
	next["pings"] = 30 // 10 and 20 are committed
	trim(env, committed, 32, true)
	if !slices.Equal(c.GetPending(), []uint64{10, 20}) || len(c.GetSent()) != 3 || recordedAt(c, 30) != nil {
		t.Errorf("committed up to 30: pending %v, recorded %v; want 40 and 30 pending, 3 recorded", c.GetPending(), c.GetSent())
	}
	next["pings"] = 51
	advance(env, "timers", 1, 7, 0, 0, false, "k", nil) // another partition's write trims this one
	trim(env, committed, 32, true)
	if len(c.GetPending()) != 0 || len(c.GetSent()) != 0 || c.GetOffset() != 50 || c.GetSeq() != 50<<16 || c.GetDigest() != 50 {
		t.Errorf("all committed: cursor %v; want the position alone", c)
	}
	if got := recordedAt(c, 0); got != nil {
		t.Errorf("head's outputs kept after its commit: %v", got)
	}
}

// Envelopes written before cursors held their outputs (testdata, frozen) still
// decode, and their replay memory still answers until it is migrated.
func TestLegacyEnvelopeStillDecodes(t *testing.T) {
	raw, err := os.ReadFile("testdata/envelope-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	env, err := decodeEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	st, err := unwrapState[testpb.DeviceState](env)
	if err != nil || st.GetDeviceId() != "veh-000123" || st.GetPings() != 5 {
		t.Fatalf("state %v, %v", st, err)
	}
	if len(env.GetTimers()) != 1 || env.GetTimers()[0].GetName() != "silence" {
		t.Errorf("timers %v", env.GetTimers())
	}
	pings := cursorOf(env, "pings", 7)
	// Ordered inputs at offsets 100..112 (3 apart), HLC 1<<40 + i<<16; outputs of i = 2, 4.
	for i, want := range []bool{false, false, true, false, true} {
		hlcv := uint64(1<<40 + i*65536)
		if !applied(pings, int64(100+3*i), hlcv, true) {
			t.Errorf("input %d not applied", i)
		}
		if got := sentFor(env, "pings", 7, hlcv) != nil; got != want {
			t.Errorf("input %d: legacy outputs found %v, want %v", i, got, want)
		}
	}
	// The unordered timer cursor migrates exactly on its next input.
	advance(env, "debouncer-timers", 7, 30, 0, 0, false, "veh-000123", nil)
	trim(env, nil, 4, true)
	timers := cursorOf(env, "debouncer-timers", 7)
	if !slices.Equal(timers.GetPending(), []uint64{8, 9, 10}) || len(timers.GetSent()) != 3 || recordedAt(timers, 8) == nil || recordedAt(timers, 10) == nil {
		t.Errorf("migrated timer cursor %v", timers)
	}
	if got := recordedAt(timers, 9).GetOutputs()[0].GetValue(); !bytes.Equal(got, []byte{9, 1}) {
		t.Errorf("migrated output of offset 21: %v", got)
	}
	for _, s := range env.GetSent() {
		if s.GetTopic() == "debouncer-timers" {
			t.Errorf("legacy output left after migration: %v", s)
		}
	}
	if sentFor(env, "pings", 7, 1<<40+4*65536) == nil {
		t.Errorf("the ordered cursor's legacy outputs went with another cursor's migration")
	}
}
