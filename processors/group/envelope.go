package group

import (
	"fmt"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// The table encoding is once's (internal/once/envelope.go); these are the
// names the kit's stores and codecs call it by.
const envelopeMagic = once.Magic

func enveloped(b []byte) bool                          { return once.Enveloped(b) }
func encodeEnvelope(e *kitpb.Envelope) ([]byte, error) { return once.Encode(e) }
func decodeEnvelope(b []byte) (*kitpb.Envelope, error) { return once.Decode(b) }

// DefaultReplayWindow is how many inputs per key and input partition the kit
// remembers (with their outputs) by default. It remembers only those that can
// be redelivered — at or above the group's committed offset, which it polls
// from the broker — and applies no more of a key's inputs that emitted than
// this ahead of the commit: the next waits for the commit (awaitRoom). Only when the
// committed offsets are unknown (Goka's tester) does the cap drop inputs.
const DefaultReplayWindow = 32

// envelopeCodec is the Goka codec of a group table: values are *kitpb.Envelope.
// It also accepts the application's state (*S) for Encode, so Goka's tester can
// seed a table with plain state, and decodes tables written before envelopes.
type envelopeCodec[S any, PS codecs.Message[S]] struct{}

var marshalOpts = protov2.MarshalOptions{Deterministic: true}

func (envelopeCodec[S, PS]) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case *kitpb.Envelope:
		return encodeEnvelope(v)
	case PS:
		st, err := marshalOpts.Marshal(v)
		if err != nil {
			return nil, err
		}
		return encodeEnvelope(&kitpb.Envelope{State: st, HasState: true})
	case []byte:
		return v, nil
	}
	var zero PS
	return nil, fmt.Errorf("group table: cannot encode %T (want *kitpb.Envelope or %T)", value, zero)
}

// Decode never fails: bytes that are neither an envelope nor bare state decode
// to *codecs.Poison, which State treats as absent (and counts).
func (envelopeCodec[S, PS]) Decode(data []byte) (any, error) {
	env, err := decodeEnvelope(data)
	if err != nil {
		var zero PS
		return &codecs.Poison{Data: append([]byte(nil), data...), Schema: "envelope of " + string(zero.ProtoReflect().Descriptor().FullName()), Err: err}, nil
	}
	return env, nil
}

// StateOf extracts the application's state from a group-table value as Goka
// hands it over (from a view, an iterator or the tester): nil when the key has
// none, an error when it cannot be decoded.
func StateOf[S any, PS codecs.Message[S]](v any) (PS, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case *codecs.Poison:
		return nil, x
	case *kitpb.Envelope:
		return unwrapState[S, PS](x)
	case PS:
		return x, nil
	}
	return nil, fmt.Errorf("group table: unexpected value %T", v)
}

func unwrapState[S any, PS codecs.Message[S]](env *kitpb.Envelope) (PS, error) {
	if env == nil || !env.GetHasState() {
		return nil, nil
	}
	st := PS(new(S))
	if err := protov2.Unmarshal(env.GetState(), st); err != nil {
		return nil, &codecs.Poison{Data: env.GetState(), Schema: string(st.ProtoReflect().Descriptor().FullName()), Err: err}
	}
	return st, nil
}

// committedFunc is the group's committed offsets (once.Committed).
type committedFunc = once.Committed

// DecodeTableValue decodes the bytes of a group-table record (as read from the
// table topic by any consumer) into the application's state: nil when the key
// has none.
func DecodeTableValue[S any, PS codecs.Message[S]](data []byte) (PS, error) {
	env, err := decodeEnvelope(data)
	if err != nil {
		return nil, fmt.Errorf("group table value: %w", err)
	}
	return unwrapState[S, PS](env)
}
