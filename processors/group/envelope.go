package group

import (
	"fmt"
	"slices"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// envelopeMagic precedes every envelope in a group table. No protobuf message
// starts with a 0x00 byte (field number 0 is invalid), so a value without it is
// bare application state written before envelopes existed.
const envelopeMagic = "\x00\x01"

// enveloped reports whether b starts with envelopeMagic.
func enveloped(b []byte) bool {
	return len(b) >= len(envelopeMagic) && string(b[:len(envelopeMagic)]) == envelopeMagic
}

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

func encodeEnvelope(e *kitpb.Envelope) ([]byte, error) {
	// Size fills every size cache of e, so the marshal that follows (and
	// the envelope cache's accounting) reads them instead of sizing e again.
	b := make([]byte, len(envelopeMagic), len(envelopeMagic)+marshalOpts.Size(e))
	copy(b, envelopeMagic)
	return cachedSize.MarshalAppend(b, e)
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
	if !enveloped(data) {
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

// applied reports whether the input at offset (with HLC seq, on an ordered
// stream) is one the cursor has applied: its position is not beyond the
// cursor's, and on an ordered stream neither is its HLC (an HLC above every
// applied one at an old position is new data at reused offsets, as after a
// topic is recreated).
func applied(c *kitpb.Cursor, offset int64, seq uint64, ordered bool) bool {
	if offset > c.GetOffset() {
		return false
	}
	return !ordered || seq <= c.GetSeq()
}

// recordedAt returns what the input back offsets before the cursor's emitted,
// or nil.
func recordedAt(c *kitpb.Cursor, back uint64) *kitpb.Recorded {
	for _, r := range c.GetSent() {
		if r.GetBack() == back {
			return r
		}
	}
	return nil
}

// remembered reports whether the cursor still lists the input back offsets
// before its own (the head itself always).
func remembered(c *kitpb.Cursor, back uint64) bool {
	return back == 0 || slices.Contains(c.GetPending(), back)
}

// inWindow reports whether seq is one of the applied inputs a legacy cursor
// (Cursor.recent) still remembers.
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

// sentFor returns what the input (topic, partition, seq) emitted according to
// a legacy envelope's Envelope.sent, or nil.
func sentFor(env *kitpb.Envelope, topic string, partition int32, seq uint64) *kitpb.Sent {
	for _, s := range env.GetSent() {
		if s.GetSeq() == seq && s.GetTopic() == topic && s.GetPartition() == partition {
			return s
		}
	}
	return nil
}

// committedFunc tells the next offset the group would consume from an input
// partition after a restart (its committed offset), ok false when unknown.
// Inputs below it cannot be redelivered, except by a reset of the group's
// offsets.
type committedFunc func(topic string, partition int32) (next int64, ok bool)

// advance records an applied input in env: the cursor moves to (offset, seq),
// the previous head joins the pending inputs, and the input's outputs are
// recorded, keyed like the input (key) stored with an empty key. trim then
// bounds what is kept.
func advance(env *kitpb.Envelope, topic string, partition int32, offset int64, seq, digest uint64, ordered bool, key string, outputs []*kitpb.Output) {
	c := cursorOf(env, topic, partition)
	switch {
	case c == nil:
		c = &kitpb.Cursor{Topic: topic, Partition: partition, Offset: offset}
		env.Cursors = append(env.Cursors, c)
	case offset > c.Offset:
		migrateLegacy(env, c, ordered)
		// Shift in place (this runs for every input): the old head becomes the
		// newest pending input, every distance grows by the step.
		d := uint64(offset - c.Offset)
		c.Pending = append(c.Pending, 0)
		copy(c.Pending[1:], c.Pending[:len(c.Pending)-1])
		c.Pending[0] = 0
		for i := range c.Pending {
			c.Pending[i] += d
		}
		for _, r := range c.Sent {
			r.Back += d
		}
		c.Offset = offset
	default:
		// A position not beyond the head that is still new (its HLC is above
		// every applied one): the partition's offsets started over. Its
		// earlier positions mean nothing any more.
		c.Offset, c.Pending, c.Sent, c.Recent = offset, nil, nil, nil
		dropLegacySent(env, topic, partition)
	}
	c.Seq, c.Digest = 0, 0
	if ordered {
		c.Seq, c.Digest = seq, digest
	}
	if len(outputs) > 0 {
		stored := make([]*kitpb.Output, len(outputs))
		for i, o := range outputs {
			stored[i] = o
			if o.GetKey() == key && key != "" {
				stored[i] = &kitpb.Output{Topic: o.GetTopic(), Value: o.GetValue(), Headers: o.GetHeaders()}
			}
		}
		c.Sent = append(c.Sent, &kitpb.Recorded{Outputs: stored})
	}
}

// migrateLegacy moves what a cursor written before cursors held their outputs
// remembers into the current form, before the cursor first moves. On a stream
// without order the legacy sequence is the offset, so it converts exactly; on
// an ordered one the legacy window is of HLCs, whose positions are unknown:
// its outputs stay in Envelope.sent (found by HLC) until trim drops them.
func migrateLegacy(env *kitpb.Envelope, c *kitpb.Cursor, ordered bool) {
	if ordered {
		c.Recent = nil
		return
	}
	if len(c.Recent) == 0 && len(env.Sent) == 0 {
		return
	}
	c.Pending = append(c.Pending, c.Recent...)
	c.Recent = nil
	for _, s := range env.Sent {
		if s.GetTopic() == c.Topic && s.GetPartition() == c.Partition && s.GetSeq() <= uint64(c.Offset) {
			c.Sent = append(c.Sent, &kitpb.Recorded{Back: uint64(c.Offset) - s.GetSeq(), Outputs: s.GetOutputs()})
		}
	}
	dropLegacySent(env, c.Topic, c.Partition)
}

func dropLegacySent(env *kitpb.Envelope, topic string, partition int32) {
	if len(env.Sent) == 0 {
		return
	}
	env.Sent = slices.DeleteFunc(env.Sent, func(s *kitpb.Sent) bool { return s.GetTopic() == topic && s.GetPartition() == partition })
	if len(env.Sent) == 0 {
		env.Sent = nil
	}
}

// trim keeps, per cursor, only the inputs that can still be redelivered —
// those at or above the partition's committed offset — and at most window of
// them (the head counts), with their outputs. While capped is false it never
// drops one of those that has outputs (they may not have been acknowledged;
// awaitRoom bounds them to the window instead), only output-less ones beyond
// the window: a redelivery of one at or above the commit then knows it had
// none (replay). When capped, or the committed offset is unknown (Goka's
// tester), the window alone bounds.
func trim(env *kitpb.Envelope, committed committedFunc, window int, capped bool) {
	for _, c := range env.GetCursors() {
		next, known := int64(0), false
		if committed != nil {
			next, known = committed(c.GetTopic(), c.GetPartition())
		}
		keep := c.Pending[:0]
		for _, back := range c.Pending {
			if known && c.Offset-int64(back) < next {
				break // newest first: every later one is older still
			}
			if len(keep) >= window-1 {
				if capped || !known {
					break
				}
				if recordedAt(c, back) == nil {
					continue // no outputs to lose
				}
			}
			keep = append(keep, back)
		}
		c.Pending = keep
		if len(c.Pending) == 0 {
			c.Pending = nil
		}
		headLive := !known || c.Offset >= next
		c.Sent = slices.DeleteFunc(c.Sent, func(r *kitpb.Recorded) bool {
			if r.GetBack() == 0 {
				return !headLive
			}
			return !slices.Contains(c.Pending, r.GetBack())
		})
		if len(c.Sent) == 0 {
			c.Sent = nil
		}
		// Legacy outputs of an ordered cursor: kept until every input they
		// can belong to is committed, or (when capped) the window has
		// filled since.
		if (known && next > c.Offset) || ((capped || !known) && len(c.Pending) >= window-1) {
			c.Recent = nil
			dropLegacySent(env, c.GetTopic(), c.GetPartition())
		}
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
