package once

import (
	"slices"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Input is the position of one input record, as its key's cursor records it.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
	// Ordered: the input's stream declares an HLC (Seq), which must increase
	// per key; Digest is the digest of its encoding, which recognises the
	// same record produced again at a new position. Both 0 when unordered.
	Ordered bool
	Seq     uint64
	Digest  uint64
}

// Committed tells the next offset the group would consume from an input
// partition after a restart (its committed offset), ok false when unknown.
// Inputs below it cannot be redelivered, except by a reset of the group's
// offsets.
type Committed func(topic string, partition int32) (next int64, ok bool)

// Bounds is what bounds a key's memory of its inputs.
type Bounds struct {
	// Window is how many inputs per key and input partition are kept (the
	// head counts) when nothing else bounds them.
	Window int
	// Committed is the group's committed offsets (nil: unknown).
	Committed Committed
	// Waits: a key's inputs wait for the commit (Full) rather than have
	// inputs with outputs trimmed ahead of it; false under Goka's tester,
	// which commits nothing, where the window alone bounds.
	Waits bool
}

func (b Bounds) committed(topic string, partition int32) (int64, bool) {
	if b.Committed == nil {
		return 0, false
	}
	return b.Committed(topic, partition)
}

// CursorOf finds the cursor of an input partition, or nil.
func CursorOf(env *kitpb.Envelope, topic string, partition int32) *kitpb.Cursor {
	for _, c := range env.GetCursors() {
		if c.GetTopic() == topic && c.GetPartition() == partition {
			return c
		}
	}
	return nil
}

// Applied reports whether the input at offset (with HLC seq, on an ordered
// stream) is one the cursor has applied: its position is not beyond the
// cursor's, and on an ordered stream neither is its HLC (an HLC above every
// applied one at an old position is new data at reused offsets, as after a
// topic is recreated).
func Applied(c *kitpb.Cursor, offset int64, seq uint64, ordered bool) bool {
	if offset > c.GetOffset() {
		return false
	}
	return !ordered || seq <= c.GetSeq()
}

// RecordedAt returns what the input back offsets before the cursor's emitted,
// or nil.
func RecordedAt(c *kitpb.Cursor, back uint64) *kitpb.Recorded {
	for _, r := range c.GetSent() {
		if r.GetBack() == back {
			return r
		}
	}
	return nil
}

// Remembered reports whether the cursor still lists the input back offsets
// before its own (the head itself always).
func Remembered(c *kitpb.Cursor, back uint64) bool {
	return back == 0 || slices.Contains(c.GetPending(), back)
}

// InWindow reports whether seq is one of the applied inputs a legacy cursor
// (Cursor.recent) still remembers.
func InWindow(c *kitpb.Cursor, seq uint64) bool {
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

// SentFor returns what the input (topic, partition, seq) emitted according to
// a legacy envelope's Envelope.sent, or nil.
func SentFor(env *kitpb.Envelope, topic string, partition int32, seq uint64) *kitpb.Sent {
	for _, s := range env.GetSent() {
		if s.GetSeq() == seq && s.GetTopic() == topic && s.GetPartition() == partition {
			return s
		}
	}
	return nil
}

// Record records an applied input in env and trims what can be forgotten
// (Advance, then Trim): what a key's write stores of its input.
func (b Bounds) Record(env *kitpb.Envelope, in Input, key string, outputs []*kitpb.Output) {
	Advance(env, in, key, outputs)
	b.Trim(env)
}

// Advance records an applied input in env: the cursor moves to the input's
// position, the previous head joins the pending inputs, and the input's
// outputs are recorded, those keyed like the input (key) stored with an
// empty key. Trim then bounds what is kept.
func Advance(env *kitpb.Envelope, in Input, key string, outputs []*kitpb.Output) {
	c := CursorOf(env, in.Topic, in.Partition)
	switch {
	case c == nil:
		c = &kitpb.Cursor{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset}
		env.Cursors = append(env.Cursors, c)
	case in.Offset > c.Offset:
		migrateLegacy(env, c, in.Ordered)
		// Shift in place (this runs for every input): the old head becomes the
		// newest pending input, every distance grows by the step.
		d := uint64(in.Offset - c.Offset)
		c.Pending = append(c.Pending, 0)
		copy(c.Pending[1:], c.Pending[:len(c.Pending)-1])
		c.Pending[0] = 0
		for i := range c.Pending {
			c.Pending[i] += d
		}
		for _, r := range c.Sent {
			r.Back += d
		}
		c.Offset = in.Offset
	default:
		// A position not beyond the head that is still new (its HLC is above
		// every applied one): the partition's offsets started over. Its
		// earlier positions mean nothing any more.
		c.Offset, c.Pending, c.Sent, c.Recent = in.Offset, nil, nil, nil
		dropLegacySent(env, in.Topic, in.Partition)
	}
	c.Seq, c.Digest = 0, 0
	if in.Ordered {
		c.Seq, c.Digest = in.Seq, in.Digest
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
// its outputs stay in Envelope.sent (found by HLC) until Trim drops them.
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

// Trim keeps, per cursor, only the inputs that can still be redelivered —
// those at or above the partition's committed offset — and at most Window of
// them (the head counts), with their outputs. While b.Waits it never drops
// one of those that has outputs (they may not have been acknowledged; Full
// bounds them to the window instead), only output-less ones beyond the
// window: a redelivery of one at or above the commit then knows it had none
// (Check). Otherwise, or with the committed offset unknown (Goka's tester),
// the window alone bounds.
func (b Bounds) Trim(env *kitpb.Envelope) {
	capped := !b.Waits
	for _, c := range env.GetCursors() {
		next, known := b.committed(c.GetTopic(), c.GetPartition())
		keep := c.Pending[:0]
		for _, back := range c.Pending {
			if known && c.Offset-int64(back) < next {
				break // newest first: every later one is older still
			}
			if len(keep) >= b.Window-1 {
				if capped || !known {
					break
				}
				if RecordedAt(c, back) == nil {
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
		if (known && next > c.Offset) || ((capped || !known) && len(c.Pending) >= b.Window-1) {
			c.Recent = nil
			dropLegacySent(env, c.GetTopic(), c.GetPartition())
		}
	}
}

// Full reports whether applying another input of cur's partition must wait
// for the group's offset commit: cur holds the outputs of Window or more
// inputs at or above the committed offset (applying another would make the
// envelope outgrow the window or forget outputs that may not have reached the
// broker). oldest is the offset of the Window-th newest of them: the commit
// (now at next) must pass it to make room. Never full unless b.Waits and the
// committed offset is known: the window alone bounds then.
func (b Bounds) Full(cur *kitpb.Cursor) (oldest, next int64, full bool) {
	if !b.Waits || cur == nil || len(cur.GetSent()) < b.Window {
		return 0, 0, false
	}
	next, ok := b.committed(cur.GetTopic(), cur.GetPartition())
	if !ok {
		return 0, next, false
	}
	oldest, full = fullWindow(cur, next, b.Window)
	return oldest, next, full
}

// fullWindow reports whether the cursor holds the outputs of window or more
// inputs at or above the committed offset next, and the offset of the
// window-th newest of them.
func fullWindow(cur *kitpb.Cursor, next int64, window int) (oldest int64, full bool) {
	var live []uint64
	for _, r := range cur.GetSent() {
		if cur.GetOffset()-int64(r.GetBack()) >= next {
			live = append(live, r.GetBack())
		}
	}
	if len(live) < window {
		return 0, false
	}
	slices.Sort(live) // newest first
	return cur.GetOffset() - int64(live[window-1]), true
}

// Passed reports whether the commit has passed oldest (or is unknown): a
// waiting input may be applied.
func (b Bounds) Passed(topic string, partition int32, oldest int64) (next int64, passed bool) {
	next, ok := b.committed(topic, partition)
	return next, !ok || next > oldest
}
