package tablecodec

import (
	"fmt"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Magic precedes every envelope in a group table. No protobuf message starts
// with a 0x00 byte (field number 0 is invalid), so a value without it is bare
// application state written before envelopes existed.
const Magic = once.Magic

// Enveloped reports whether b starts with Magic.
func Enveloped(b []byte) bool { return once.Enveloped(b) }

// Encode is the table value of e: Magic, then e encoded deterministically.
// It leaves every size cache of e filled, so a caller may size e again with
// UseCachedSize for free.
func Encode(e *kitpb.Envelope) ([]byte, error) { return once.Encode(e) }

// Decode is the envelope of a table value; bare state (no Magic) is an
// envelope holding it, with no cursors, so nothing of it is replayed.
func Decode(data []byte) (*kitpb.Envelope, error) { return once.Decode(data) }

var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// Codec is the Goka codec of a group table: values are *kitpb.Envelope.
// It also accepts the application's state (*S) for Encode, so Goka's tester
// can seed a table with plain state, and decodes tables written before
// envelopes.
type Codec[S any, PS codecs.Message[S]] struct{}

// Encode encodes an envelope, the application's state (as an envelope
// holding it) or bytes already encoded.
func (Codec[S, PS]) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case *kitpb.Envelope:
		return Encode(v)
	case PS:
		st, err := marshalOpts.Marshal(v)
		if err != nil {
			return nil, err
		}
		return Encode(&kitpb.Envelope{State: st, HasState: true})
	case []byte:
		return v, nil
	}
	var zero PS
	return nil, fmt.Errorf("group table: cannot encode %T (want *kitpb.Envelope or %T)", value, zero)
}

// Decode never fails: bytes that are neither an envelope nor bare state
// decode to *codecs.Poison, which StateOf returns as its error (and a
// group's State treats as absent).
func (Codec[S, PS]) Decode(data []byte) (any, error) {
	env, err := Decode(data)
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
		return State[S, PS](x)
	case PS:
		return x, nil
	}
	return nil, fmt.Errorf("group table: unexpected value %T", v)
}

// State is the application's state an envelope holds: nil when it holds
// none, a *codecs.Poison when the state's bytes do not decode as *S.
func State[S any, PS codecs.Message[S]](env *kitpb.Envelope) (PS, error) {
	if env == nil || !env.GetHasState() {
		return nil, nil
	}
	st := PS(new(S))
	if err := protov2.Unmarshal(env.GetState(), st); err != nil {
		return nil, &codecs.Poison{Data: env.GetState(), Schema: string(st.ProtoReflect().Descriptor().FullName()), Err: err}
	}
	return st, nil
}

// DecodeState decodes the bytes of a group-table record (as read from the
// table topic by any consumer) into the application's state: nil when the
// key has none.
func DecodeState[S any, PS codecs.Message[S]](data []byte) (PS, error) {
	env, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("group table value: %w", err)
	}
	return State[S, PS](env)
}

// StateBytes returns the application's state encoded in a group-table value
// (an envelope, or bare state written before envelopes), so a tool that knows
// a table's message type only by name (fencectl topic read) can decode it. ok
// is false for a tombstone and for an envelope that holds no state (the key's
// state was deleted but its cursors are kept).
func StateBytes(value []byte) (state []byte, ok bool, err error) {
	if value == nil {
		return nil, false, nil
	}
	env, err := Decode(value)
	if err != nil {
		return nil, false, fmt.Errorf("group table: not an envelope: %w", err)
	}
	return env.GetState(), env.GetHasState(), nil
}
