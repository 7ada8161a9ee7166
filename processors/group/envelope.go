package group

import (
	"bytes"
	"fmt"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/kitpb"
)

// envelopeMagic precedes every envelope in a group table. No protobuf message
// starts with a 0x00 byte (field number 0 is invalid), so a value without it is
// bare application state written before envelopes existed.
var envelopeMagic = []byte{0x00, 0x01}

// DefaultReplayWindow is how many recent inputs per key and input partition the
// kit remembers (with their outputs) by default. A redelivery is recognised
// for any input since the last offset commit as long as the key had fewer
// inputs than this in that time; with the sarama default of committing every
// second that is far more than any key sees.
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

func encodeEnvelope(e *kitpb.Envelope) ([]byte, error) {
	b := make([]byte, len(envelopeMagic), len(envelopeMagic)+marshalOpts.Size(e))
	copy(b, envelopeMagic)
	return marshalOpts.MarshalAppend(b, e)
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

func decodeEnvelope(data []byte) (*kitpb.Envelope, error) {
	if !bytes.HasPrefix(data, envelopeMagic) {
		// Bare state from before envelopes: no cursors, so nothing is replayed.
		return &kitpb.Envelope{State: append([]byte(nil), data...), HasState: true}, nil
	}
	env := &kitpb.Envelope{}
	if err := protov2.Unmarshal(data[len(envelopeMagic):], env); err != nil {
		return nil, err
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

// cursorOf finds the cursor of an input partition, or nil.
func cursorOf(env *kitpb.Envelope, topic string, partition int32) *kitpb.Cursor {
	for _, c := range env.GetCursors() {
		if c.GetTopic() == topic && c.GetPartition() == partition {
			return c
		}
	}
	return nil
}

// inWindow reports whether seq is one of the applied inputs the cursor still
// remembers.
func inWindow(c *kitpb.Cursor, seq uint64) bool {
	if seq == c.GetSeq() {
		return true
	}
	if seq > c.GetSeq() {
		return false
	}
	d := c.GetSeq() - seq
	for _, r := range c.GetRecent() {
		if r == d {
			return true
		}
	}
	return false
}

// sentFor returns what the input (topic, partition, seq) emitted, or nil.
func sentFor(env *kitpb.Envelope, topic string, partition int32, seq uint64) *kitpb.Sent {
	for _, s := range env.GetSent() {
		if s.GetSeq() == seq && s.GetTopic() == topic && s.GetPartition() == partition {
			return s
		}
	}
	return nil
}

// advance records an applied input in env: the cursor moves to (offset, seq),
// remembers at most window inputs, and outputs of inputs that fell out of the
// window are dropped, so the envelope stays bounded.
func advance(env *kitpb.Envelope, topic string, partition int32, offset int64, seq uint64, outputs []*kitpb.Output, window int) {
	c := cursorOf(env, topic, partition)
	if c == nil {
		c = &kitpb.Cursor{Topic: topic, Partition: partition, Offset: offset, Seq: seq}
		env.Cursors = append(env.Cursors, c)
	} else {
		if seq > c.Seq {
			// Shift the window in place (this runs for every input): drop the
			// oldest when full, move the rest one on, put the previous head first.
			d := seq - c.Seq
			n := min(len(c.Recent)+1, window-1)
			if n > len(c.Recent) {
				c.Recent = append(c.Recent, 0)
			}
			c.Recent = c.Recent[:max(n, 0)]
			for i := len(c.Recent) - 1; i > 0; i-- {
				c.Recent[i] = c.Recent[i-1] + d
			}
			if len(c.Recent) > 0 {
				c.Recent[0] = d
			}
			c.Seq = seq
		}
		c.Offset = max(c.Offset, offset)
	}
	oldest := c.Seq
	if n := len(c.Recent); n > 0 {
		oldest = c.Seq - c.Recent[n-1]
	}
	kept := env.Sent[:0]
	for _, s := range env.Sent {
		if s.GetTopic() == topic && s.GetPartition() == partition && s.GetSeq() < oldest {
			continue
		}
		kept = append(kept, s)
	}
	clear(env.Sent[len(kept):])
	env.Sent = kept
	if len(outputs) > 0 {
		env.Sent = append(env.Sent, &kitpb.Sent{Topic: topic, Partition: partition, Seq: seq, Outputs: outputs})
	}
}

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
