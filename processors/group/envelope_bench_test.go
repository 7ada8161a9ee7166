package group

import (
	"hash/fnv"
	"os"
	"testing"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group/internal/once"
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
		once.Advance(env, once.Input{Topic: "pings", Partition: 7, Offset: int64(i), Ordered: true, Seq: uint64(1<<40 + i*65536), Digest: 1}, "veh-000123", nil)
		once.Bounds{Window: DefaultReplayWindow}.Trim(env)
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
			once.Bounds{Window: DefaultReplayWindow, Committed: func(string, int32) (int64, bool) { return DefaultReplayWindow, true }}.Trim(e)
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
				once.Advance(e, once.Input{Topic: "pings", Partition: 7, Offset: off, Ordered: true, Seq: uint64(1<<41 + i), Digest: h.Sum64()}, "veh-000123", out)
				committed := func(string, int32) (int64, bool) { return off, tc.lean }
				once.Bounds{Window: DefaultReplayWindow, Committed: committed}.Trim(e)
				if _, err := encodeEnvelope(e); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(start)), "value-B")
		})
	}
}

// Envelopes written before cursors held their outputs (testdata, frozen)
// still decode to the application's state (their replay memory:
// internal/once's TestLegacyEnvelopeStillDecodes).
func TestLegacyEnvelopeStateDecodes(t *testing.T) {
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
}
