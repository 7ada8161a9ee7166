package once

import "github.com/fencestream/fencestream/processors/group/kitpb"

// Kind is what becomes of an input before its handler runs.
type Kind uint8

const (
	// New: the input was not applied; the handler runs.
	New Kind = iota
	// Replay: the input was applied (its position is one the cursor has
	// passed); what it emitted is produced again (Verdict.Memory says
	// whether that is known) and the handler does not see it.
	Replay
	// Copy: a new position, but the exact record the cursor applied last
	// (same HLC, same digest): a producer's retry, replayed like a
	// redelivery of it.
	Copy
	// DuplicateHLC: a new position with the HLC of the last applied input
	// and other contents: dead-lettered.
	DuplicateHLC
	// Stale: a new position whose HLC is below the last applied: dead-lettered.
	Stale
)

// Memory is what the envelope knows of a replayed input's outputs.
type Memory uint8

const (
	// Recorded: its outputs are recorded (Verdict.Outputs); produce them again.
	Recorded Memory = iota
	// OutputLess: it is known to have emitted nothing.
	OutputLess
	// Forgotten: it is older than what the envelope remembers (below the
	// committed offset: the group's offsets were reset, or commits are
	// unknown and it left the window); its effect is in the state, its
	// outputs cannot be produced again.
	Forgotten
)

// Verdict is Check's decision on one input.
type Verdict struct {
	Kind Kind
	// Cursor is the input partition's cursor (nil when the key has none).
	Cursor *kitpb.Cursor
	// Back is how far before the cursor's head a replayed input is.
	Back uint64
	// Memory and Outputs: a replay's recorded outputs, those keyed like the
	// input stored with an empty key (the caller gives them the input's).
	Memory  Memory
	Outputs []*kitpb.Output
}

// Check decides, before the handler runs, whether in was already applied to
// the key whose stored envelope (with any deferred advances applied) is env.
// A replay is recognised by its position (an offset the cursor has passed)
// or, at a new position, by its exact bytes (in.Digest equal to the last
// applied one's); never by the HLC alone. A new ordered input whose HLC is
// not above the last applied is DuplicateHLC or Stale.
func (b Bounds) Check(env *kitpb.Envelope, in Input) Verdict {
	cur := CursorOf(env, in.Topic, in.Partition)
	if cur == nil {
		return Verdict{Kind: New}
	}
	if Applied(cur, in.Offset, in.Seq, in.Ordered) {
		// How a legacy envelope (Envelope.sent, Cursor.recent) knows the
		// input: by HLC when ordered, else by offset.
		legacySeq := uint64(in.Offset)
		if in.Ordered {
			legacySeq = in.Seq
		}
		return b.replay(env, cur, in, Replay, uint64(cur.GetOffset()-in.Offset), legacySeq)
	}
	if !in.Ordered || in.Seq > cur.GetSeq() {
		return Verdict{Kind: New, Cursor: cur}
	}
	if in.Seq == cur.GetSeq() {
		if d := cur.GetDigest(); d != 0 && d == in.Digest {
			return b.replay(env, cur, in, Copy, 0, in.Seq)
		}
		return Verdict{Kind: DuplicateHLC, Cursor: cur}
	}
	return Verdict{Kind: Stale, Cursor: cur}
}

// replay finds what a replayed input emitted: recorded on its cursor, in a
// legacy envelope's Envelope.sent, or known to be nothing.
func (b Bounds) replay(env *kitpb.Envelope, cur *kitpb.Cursor, in Input, kind Kind, back, legacySeq uint64) Verdict {
	v := Verdict{Kind: kind, Cursor: cur, Back: back}
	switch {
	case RecordedAt(cur, back) != nil:
		v.Outputs = RecordedAt(cur, back).GetOutputs()
	case SentFor(env, in.Topic, in.Partition, legacySeq) != nil:
		v.Outputs = SentFor(env, in.Topic, in.Partition, legacySeq).GetOutputs()
	case Remembered(cur, back) || (len(cur.GetRecent()) > 0 && InWindow(cur, legacySeq)) || b.uncommittedOutputLess(in):
		v.Memory = OutputLess
	default:
		v.Memory = Forgotten
	}
	return v
}

// uncommittedOutputLess reports whether the input, though not remembered, is
// known to have had no outputs: while inputs wait for the commit (Waits) trim
// forgets no input with outputs at or above the committed offset, and commits
// only move forward (but for a reset of the group's offsets, the one case no
// envelope covers).
func (b Bounds) uncommittedOutputLess(in Input) bool {
	if !b.Waits {
		return false
	}
	next, ok := b.committed(in.Topic, in.Partition)
	return ok && in.Offset >= next
}
