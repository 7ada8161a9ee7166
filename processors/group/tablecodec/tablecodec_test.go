package tablecodec_test

import (
	"errors"
	"testing"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
)

type tick = kitpb.Tick

// A value a group writes reads back as its state, whether it arrives as
// bytes (DecodeState, a consumer of the table topic) or as Goka hands it
// over (Codec.Decode then StateOf); the cursors and timers stay in the
// envelope.
func TestEncodedEnvelopeReadsBackAsState(t *testing.T) {
	st, err := protov2.Marshal(&tick{Name: "d1", NowMs: 42})
	if err != nil {
		t.Fatal(err)
	}
	env := &kitpb.Envelope{State: st, HasState: true, Cursors: []*kitpb.Cursor{{Topic: "in", Offset: 7}},
		Timers: []*kitpb.Timer{{Name: "t", AtMs: 99}}}
	b, err := tablecodec.Encode(env)
	if err != nil {
		t.Fatal(err)
	}
	if !tablecodec.Enveloped(b) {
		t.Fatalf("no magic: % x", b[:min(len(b), 4)])
	}
	got, err := tablecodec.DecodeState[tick](b)
	if err != nil || got.GetName() != "d1" || got.GetNowMs() != 42 {
		t.Fatalf("DecodeState = %v, %v; want d1 at 42", got, err)
	}
	v, err := tablecodec.Codec[tick, *tick]{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	back, ok := v.(*kitpb.Envelope)
	if !ok || !protov2.Equal(back, env) {
		t.Fatalf("Codec.Decode = %v, want %v", v, env)
	}
	if s, err := tablecodec.StateOf[tick](v); err != nil || s.GetName() != "d1" {
		t.Fatalf("StateOf = %v, %v", s, err)
	}
}

// Bare state (written before envelopes) reads as that state; bytes that are
// neither are a *codecs.Poison, never a zero state; an envelope without
// state is absent.
func TestBareStatePoisonAndAbsent(t *testing.T) {
	bare, err := protov2.Marshal(&tick{Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := tablecodec.DecodeState[tick](bare); err != nil || s.GetName() != "old" {
		t.Fatalf("bare state = %v, %v; want old", s, err)
	}
	bad := append([]byte(tablecodec.Magic), 0xff, 0xff)
	v, err := tablecodec.Codec[tick, *tick]{}.Decode(bad)
	if err != nil {
		t.Fatalf("Decode must not fail: %v", err)
	}
	var poison *codecs.Poison
	if _, err := tablecodec.StateOf[tick](v); !errors.As(err, &poison) {
		t.Fatalf("StateOf(undecodable) = %v, want a *codecs.Poison", err)
	}
	empty, err := tablecodec.Encode(&kitpb.Envelope{Cursors: []*kitpb.Cursor{{Topic: "in"}}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := tablecodec.DecodeState[tick](empty); s != nil || err != nil {
		t.Fatalf("stateless envelope = %v, %v; want nil, nil", s, err)
	}
}
