package group

import (
	"testing"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/codecs/kitpb"
)

// BenchmarkStateRoundTrip puts the table-value work of one input side by side:
// bare state (decode, encode: what the kit did before envelopes) against the
// envelope (decode, unwrap, encode the state, advance the cursor with one
// output, encode), for a debouncer-sized state.
func BenchmarkStateRoundTrip(b *testing.B) {
	st := &geofencepb.DeviceState{DeviceId: "veh-000123", LastHlc: 1 << 40, LastEventTimeMs: 1_800_000_000_000, LastLat: 52.5, LastLon: 13.4, Pings: 812,
		FenceStates: []*geofencepb.FenceEntry{{FenceId: "zone-mitte-core", State: &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_INSIDE, InsideSinceMs: 1_800_000_000_000}}}}
	bare, _ := marshalOpts.Marshal(st)
	env := &kitpb.Envelope{State: bare, HasState: true}
	for i := range DefaultReplayWindow {
		advance(env, "pings", 7, int64(i), uint64(1<<40+i*65536), nil, DefaultReplayWindow)
	}
	wrapped, _ := encodeEnvelope(env)
	out := []*kitpb.Output{{Topic: "fence-triggers", Key: "veh-000123", Value: make([]byte, 120)}}
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s := &geofencepb.DeviceState{}
			if err := protov2.Unmarshal(bare, s); err != nil {
				b.Fatal(err)
			}
			s.Pings++
			if _, err := marshalOpts.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			e, err := decodeEnvelope(wrapped)
			if err != nil {
				b.Fatal(err)
			}
			s, err := unwrapState[geofencepb.DeviceState](e)
			if err != nil {
				b.Fatal(err)
			}
			s.Pings++
			if e.State, err = marshalOpts.Marshal(s); err != nil {
				b.Fatal(err)
			}
			advance(e, "pings", 7, int64(DefaultReplayWindow+i), uint64(1<<41+i), out, DefaultReplayWindow)
			if _, err := encodeEnvelope(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The cursor remembers the last window inputs and forgets the older ones, with
// their outputs.
func TestAdvanceKeepsTheWindow(t *testing.T) {
	env := &kitpb.Envelope{}
	out := []*kitpb.Output{{Topic: "t", Key: "k"}}
	for i, seq := range []uint64{10, 20, 30, 40, 50} {
		advance(env, "pings", 1, int64(i), seq, out, 4)
	}
	c := cursorOf(env, "pings", 1)
	for seq, want := range map[uint64]bool{50: true, 40: true, 30: true, 20: true, 10: false, 45: false} {
		if got := inWindow(c, seq); got != want {
			t.Errorf("inWindow(%d) = %v, want %v (cursor %v)", seq, got, want, c)
		}
	}
	if len(env.GetSent()) != 4 || sentFor(env, "pings", 1, 10) != nil || sentFor(env, "pings", 1, 20) == nil {
		t.Errorf("outputs kept for %v, want the last 4 inputs", env.GetSent())
	}
}
