package group

import (
	"slices"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
)

// The table format is tablecodec's; these are the names the kit's stores
// and the record path call it by.
const envelopeMagic = tablecodec.Magic

func enveloped(b []byte) bool                          { return tablecodec.Enveloped(b) }
func encodeEnvelope(e *kitpb.Envelope) ([]byte, error) { return tablecodec.Encode(e) }
func decodeEnvelope(b []byte) (*kitpb.Envelope, error) { return tablecodec.Decode(b) }

// DefaultReplayWindow is how many inputs per key and input partition the kit
// remembers (with their outputs) by default. It remembers only those that can
// be redelivered — at or above the group's committed offset, which it polls
// from the broker — and applies no more of a key's inputs that emitted than
// this ahead of the commit: the next waits for the commit (awaitRoom). Only when the
// committed offsets are unknown (Goka's tester) does the cap drop inputs.
const DefaultReplayWindow = 32

// envelopeCodec is the Goka codec of a group table (tablecodec.Codec).
type envelopeCodec[S any, PS codecs.Message[S]] = tablecodec.Codec[S, PS]

// marshalOpts encodes the application's messages deterministically: a
// replay writes the same bytes.
var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// StateOf extracts the application's state from a group-table value as Goka
// hands it over (from a view, an iterator or the tester): nil when the key has
// none, an error when it cannot be decoded.
func StateOf[S any, PS codecs.Message[S]](v any) (PS, error) { return tablecodec.StateOf[S, PS](v) }

func unwrapState[S any, PS codecs.Message[S]](env *kitpb.Envelope) (PS, error) {
	return tablecodec.State[S, PS](env)
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
