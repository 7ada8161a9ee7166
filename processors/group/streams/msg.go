package streams

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// msg carries a *V through the kit's handles, which want a pointer type
// that is statically a proto.Message. A Stream[V] names only V; msg[V] is
// that pointer twin for any V, checked once (checkMessage) when the builder
// first sees V, so the kit's typed checks (a topic's declared message name,
// the codec) see *V itself: ProtoReflect is *V's.
type msg[V any] struct{ v *V }

// ProtoReflect is *V's reflection; a zero msg gets a new V, so decoding
// into a fresh msg fills it, and a nil msg is a nil *V's (which encodes to
// nothing: a tombstone, as a removed table row is written).
func (m *msg[V]) ProtoReflect() protoreflect.Message {
	if m == nil { // a codec naming the type in an error
		return any((*V)(nil)).(proto.Message).ProtoReflect()
	}
	if m.v == nil {
		m.v = new(V)
	}
	return any(m.v).(proto.Message).ProtoReflect()
}

func wrap[V any](v *V) *msg[V] {
	if v == nil {
		return nil
	}
	return &msg[V]{v: v}
}

func unwrap[V any](m *msg[V]) *V {
	if m == nil {
		return nil
	}
	return m.v
}

// checkMessage says why V cannot flow through a stream: *V must be a
// generated protobuf message.
func checkMessage[V any]() error {
	if _, ok := any(new(V)).(proto.Message); !ok {
		return fmt.Errorf("streams: %s is not a protobuf message (*%[1]s does not implement proto.Message)", reflect.TypeFor[V]())
	}
	return nil
}

// nameOf is V's protobuf full name, or its Go name when V is not a message
// (checkMessage has then recorded the error).
func nameOf[V any]() string {
	if m, ok := any(new(V)).(proto.Message); ok {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return reflect.TypeFor[V]().String()
}
