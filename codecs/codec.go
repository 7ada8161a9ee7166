package codecs

import (
	"fmt"

	"github.com/golang/protobuf/proto"
	protov2 "google.golang.org/protobuf/proto"
)

// Poison is what Decode yields for bytes it cannot decode. Goka would stop the
// processor on a decode error; a Poison value lets the callback dead-letter the
// record instead.
type Poison struct {
	Data   []byte
	Schema string
	Err    error
}

func (p *Poison) Error() string {
	return fmt.Sprintf("undecodable %s (%d bytes): %v", p.Schema, len(p.Data), p.Err)
}

// Message is a generated protobuf message type whose pointer is *M.
type Message[M any] interface {
	*M
	protov2.Message
}

// Proto is a goka.Codec for the protobuf message *M.
type Proto[M any, P Message[M]] struct{}

// For returns the codec for message type *M, e.g. codecs.For[geofencepb.Ping]().
func For[M any, P Message[M]]() Proto[M, P] { return Proto[M, P]{} }

// Encode implements goka.Codec. It accepts *M, or []byte already encoded as
// *M (the kit encodes an output once, records it and replays the same bytes);
// anything else is a programming error reported as an error, never a panic.
func (Proto[M, P]) Encode(value any) ([]byte, error) {
	switch m := value.(type) {
	case P:
		return proto.Marshal(proto.MessageV1(m))
	case []byte:
		return m, nil
	}
	var zero P
	return nil, fmt.Errorf("codecs: cannot encode %T as %s", value, schemaOf(zero))
}

// Decode implements goka.Codec. It never returns an error: undecodable bytes come
// back as *Poison.
func (c Proto[M, P]) Decode(data []byte) (any, error) {
	m, err := c.Unmarshal(data)
	if err != nil {
		return &Poison{Data: append([]byte(nil), data...), Schema: schemaOf(m), Err: err}, nil
	}
	return m, nil
}

// Marshal is the typed form of Encode.
func (Proto[M, P]) Marshal(m P) ([]byte, error) { return proto.Marshal(proto.MessageV1(m)) }

// Unmarshal is the typed form of Decode; it returns the error instead of a Poison.
func (Proto[M, P]) Unmarshal(data []byte) (P, error) {
	m := P(new(M))
	if err := proto.Unmarshal(data, proto.MessageV1(m)); err != nil {
		return m, err
	}
	return m, nil
}

func schemaOf[P protov2.Message](m P) string {
	return string(m.ProtoReflect().Descriptor().FullName())
}

// As converts a value Goka handed over (from Decode) into *M. It returns the
// Poison when decoding failed, and ok=false for nil (no value).
func As[M any, P Message[M]](v any) (msg P, poison *Poison, ok bool) {
	switch x := v.(type) {
	case nil:
		return nil, nil, false
	case P:
		return x, nil, x != nil
	case *Poison:
		return nil, x, false
	default:
		return nil, &Poison{Schema: schemaOf(P(new(M))), Err: fmt.Errorf("unexpected value type %T", v)}, false
	}
}
