package bench

import (
	"testing"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestDeviceEnvelopeIsWhatTheDebouncerWrites checks a seeded table value is
// an envelope (not bare state, as the storage bench seeded before) that the
// kit reads back as the device's state, with a cursor holding outputs and a
// pending silence timer, and that its parts add up.
func TestDeviceEnvelopeIsWhatTheDebouncerWrites(t *testing.T) {
	dev, v, parts, err := deviceEnvelope(42, 24, seedBaseMs)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) < 2 || v[0] != 0 || v[1] != 1 {
		t.Fatalf("not an envelope: % x", v[:min(len(v), 8)])
	}
	env := &kitpb.Envelope{}
	if err := protov2.Unmarshal(v[2:], env); err != nil {
		t.Fatal(err)
	}
	st, err := group.StateOf[geofencepb.DeviceState](env)
	if err != nil || st.GetDeviceId() != dev || len(st.GetFenceStates()) != 2 {
		t.Fatalf("state = %v, %v; want device %s with two fences", st, err, dev)
	}
	if len(env.GetCursors()) != 1 || len(env.GetCursors()[0].GetSent()) != 1 || len(env.GetCursors()[0].GetSent()[0].GetOutputs()) != 1 {
		t.Fatalf("cursors = %v, want one with one recorded output", env.GetCursors())
	}
	if len(env.GetTimers()) != 1 || env.GetTimers()[0].GetName() != debounce.SilenceTimer || env.GetTimers()[0].GetAtMs() <= st.GetLastEventTimeMs() {
		t.Fatalf("timers = %v, want one pending silence timer after the last fix", env.GetTimers())
	}
	if parts.Total != len(v) || parts.State+parts.Cursors+parts.Outputs+parts.Timers != len(v)-2 {
		t.Errorf("parts %+v do not add up to %d bytes (+2 magic)", parts, len(v))
	}
}
