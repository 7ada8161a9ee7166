package windows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// SessionSpec describes session windows on event time: periods of activity of
// a key separated by at least Gap without records (Kafka Streams'
// SessionWindows).
type SessionSpec struct {
	// Gap is the inactivity gap: a record within Gap of a session's ends
	// (inclusive) joins it, and one within Gap of two sessions merges them.
	Gap time.Duration
	// Grace is how long after a session's end plus gap, in stream time, it
	// still takes records: a session [start, end] is closed once stream time
	// is past end + gap + grace, and a record that would only extend a closed
	// session, or start one already past it, is late.
	Grace time.Duration
	// Retention is how long after its close a closed session stays in the
	// state, for views and for merging: a record within Gap of a retained
	// session merges it (see Sessions). 0 drops it when it closes. Kafka
	// Streams' session store retention R (Materialized.withRetention, at
	// least gap plus grace) is Retention R − Gap − Grace.
	Retention time.Duration
	// Emit is when results are handed over (default EmitFinal).
	Emit EmitStrategy
	// MaxWindows bounds the sessions a key keeps (default MaxWindowsPerKey);
	// beyond it the oldest close early.
	MaxWindows int
}

// SessionWindows is sessions of a key separated by gap of inactivity, taking
// records until grace after their end plus gap.
func SessionWindows(gap, grace time.Duration) SessionSpec {
	return SessionSpec{Gap: gap, Grace: grace}
}

// Retain returns s keeping closed sessions for d after their close.
func (s SessionSpec) Retain(d time.Duration) SessionSpec { s.Retention = d; return s }

// Emitting returns s handing results over as e says.
func (s SessionSpec) Emitting(e EmitStrategy) SessionSpec { s.Emit = e; return s }

// Bounded returns s keeping up to n sessions per key instead of
// MaxWindowsPerKey.
func (s SessionSpec) Bounded(n int) SessionSpec { s.MaxWindows = n; return s }

func (s SessionSpec) validate() error {
	switch {
	case s.Gap < time.Millisecond:
		return fmt.Errorf("session gap %s must be at least 1ms", s.Gap)
	case s.Grace < 0 || s.Retention < 0:
		return fmt.Errorf("session grace %s and retention %s must not be negative", s.Grace, s.Retention)
	case s.Emit != EmitFinal && s.Emit != EmitUpdates:
		return fmt.Errorf("unknown emit strategy %d", s.Emit)
	case s.MaxWindows < 0:
		return fmt.Errorf("session bound %d must not be negative", s.MaxWindows)
	}
	return nil
}

// Sessions is a session-windowed aggregate of each key of a group, with the
// guarantees of Windows: results depend on the records in partition order
// only (a record is judged at the partition's stream time at its arrival, and
// a session closes at the first of a record of its key or its timer), and
// each session is handed over once under EmitFinal. Its state is a
// kitpb.WindowSet whose windows are the sessions, [start, end] with end the
// time of the last record (inclusive, as in Kafka Streams); a key keeps at
// most SessionSpec.MaxWindows of them (beyond, the oldest close early).
//
// Merging follows Kafka Streams' KStreamSessionWindowAggregate: a record at t
// takes every session the key still keeps — open, or closed and within
// Retention — that ends at or after t−Gap and starts at or before t+Gap; it is
// late only if the merged session would itself be closed (its end plus gap
// plus grace before stream time). So with Retention 0 a closed session is
// final, but with Retention a record that is not late (within grace of its own
// session, or extending an open one) re-opens a closed session it reaches: the
// merged session is handed over again when it closes (EmitFinal) or at once
// (EmitUpdates, with a Removed result for the old one). A "final" result is
// therefore final only once the session is past its close plus Retention.
type Sessions[S any, PS codecs.Message[S], A any, PA codecs.Message[A]] struct {
	op    *group.Operator[S, PS]
	name  string
	spec  SessionSpec
	set   func(PS) *kitpb.WindowSet
	merge func(into, from PA)
	emit  func(c *group.Context[S, PS], st PS, w Window[A, PA]) error
}

// NewSessions registers a session-windowed aggregate named name (unique in the
// group) on g; set and emit as for NewWindows. merge folds the custom
// aggregate of a session into another's when a record bridges them; it may be
// nil when Add is never given a fold. Under EmitUpdates a merge also hands
// over each absorbed session with Removed set, before the merged one (Kafka
// Streams' tombstone, stamped with the old end), so a reader keyed by the
// session's start and end, as Kafka Streams' windowed keys are, can drop it;
// as in Kafka Streams none is handed over when the merged session is the
// record's own [t, t] (it replaces a session of that same key).
func NewSessions[A any, PA codecs.Message[A], S any, PS codecs.Message[S]](g *group.Group[S, PS], name string, spec SessionSpec, set func(PS) *kitpb.WindowSet, merge func(into, from PA), emit func(c *group.Context[S, PS], st PS, w Window[A, PA]) error) *Sessions[S, PS, A, PA] {
	s := &Sessions[S, PS, A, PA]{op: group.NewOperator(g, "session", name), name: name, spec: spec, set: set, merge: merge, emit: emit}
	if err := spec.validate(); err != nil {
		s.op.Refuse(fmt.Errorf("group %s sessions %s: %w", g.Name(), name, err))
	}
	s.op.OnTimer(s.close)
	return s
}

// closes is the stream time past which a session ending at end is closed.
func (s *Sessions[S, PS, A, PA]) closes(end int64) int64 {
	return end + s.spec.Gap.Milliseconds() + s.spec.Grace.Milliseconds()
}

// Add adds a record at event time at to its key's session: a new one, the
// one it extends, or the merge of those it bridges. Sessions stream time has
// closed close (and are handed over) first. A late record is counted, in no
// session, and ErrLate returned.
func (s *Sessions[S, PS, A, PA]) Add(c *group.Context[S, PS], st PS, at time.Time, value float64, fold func(agg PA)) error {
	ws := s.set(st)
	t := at.UnixMilli()
	if t < 0 {
		return fmt.Errorf("sessions %s: event time %d ms is before the epoch", s.name, t)
	}
	now := streamNowFor(c, s.op, ws)
	errs := []error{s.advance(c, st, ws, now)}
	gap := s.spec.Gap.Milliseconds()
	merged := &kitpb.Window{StartMs: t, EndMs: t}
	var absorbed []*kitpb.Window
	for _, win := range ws.Windows {
		if win.EndMs >= t-gap && win.StartMs <= t+gap {
			absorbed = append(absorbed, win)
			merged.StartMs, merged.EndMs = min(merged.StartMs, win.StartMs), max(merged.EndMs, win.EndMs)
		}
	}
	if s.closes(merged.EndMs) < now {
		ws.Late++
		s.op.CountLate(c)
		errs = append(errs, fmt.Errorf("sessions %s: record at %s: %w (stream time %s)", s.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
	}
	if err := s.combine(merged, absorbed); err != nil {
		return err
	}
	if err := foldInto(merged, t, value, fold); err != nil {
		return fmt.Errorf("sessions %s: session %d: %w", s.name, merged.StartMs, err)
	}
	ws.Windows = slices.DeleteFunc(ws.Windows, func(w *kitpb.Window) bool { return slices.Contains(absorbed, w) })
	ws.Windows = append(ws.Windows, merged)
	slices.SortFunc(ws.Windows, func(a, b *kitpb.Window) int { return cmp.Compare(a.StartMs, b.StartMs) })
	if s.spec.Emit == EmitUpdates {
		if merged.StartMs != t || merged.EndMs != t {
			for _, old := range absorbed {
				errs = append(errs, s.handOver(c, st, old, true))
			}
		}
		errs = append(errs, s.handOver(c, st, merged, false))
	}
	errs = append(errs, s.evict(c, st, ws), s.arm(c, ws))
	return errors.Join(errs...)
}

// combine adds the counts, sums and aggregates of the absorbed sessions into
// merged, oldest first.
func (s *Sessions[S, PS, A, PA]) combine(merged *kitpb.Window, absorbed []*kitpb.Window) error {
	var agg PA
	for _, old := range absorbed {
		merged.Count += old.Count
		merged.Sum += old.Sum
		if len(old.Agg) == 0 {
			continue
		}
		from := PA(new(A))
		if err := protov2.Unmarshal(old.Agg, from); err != nil {
			return fmt.Errorf("sessions %s: aggregate of session %d: %w", s.name, old.StartMs, err)
		}
		switch {
		case agg == nil:
			agg = from
		case s.merge == nil:
			return fmt.Errorf("sessions %s: sessions %d and earlier have aggregates but no merge was given", s.name, old.StartMs)
		default:
			s.merge(agg, from)
		}
	}
	if agg != nil {
		b, err := marshalOpts.Marshal(agg)
		if err != nil {
			return fmt.Errorf("sessions %s: aggregate: %w", s.name, err)
		}
		merged.Agg = b
	}
	return nil
}

func (s *Sessions[S, PS, A, PA]) handOver(c *group.Context[S, PS], st PS, win *kitpb.Window, removed bool) error {
	if s.emit == nil {
		return nil
	}
	res, err := windowOf[A, PA](win)
	if err != nil {
		return err
	}
	res.Removed = removed
	res.Time = res.End
	return s.emit(c, st, res)
}

// advance closes, oldest first, every open session stream time now is past
// the close of, and drops closed sessions past their retention.
func (s *Sessions[S, PS, A, PA]) advance(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet, now int64) error {
	keep := s.spec.Retention.Milliseconds()
	var errs []error
	for _, win := range ws.Windows {
		if win.Closed || s.closes(win.EndMs) >= now {
			continue
		}
		win.Closed = true
		if s.spec.Emit == EmitFinal {
			errs = append(errs, s.handOver(c, st, win, false))
		}
	}
	ws.ClosedMs = max(ws.ClosedMs, now)
	ws.Windows = slices.DeleteFunc(ws.Windows, func(win *kitpb.Window) bool { return win.Closed && s.closes(win.EndMs)+keep < now })
	return errors.Join(errs...)
}

// evict closes the oldest sessions early beyond the bound.
func (s *Sessions[S, PS, A, PA]) evict(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet) error {
	var errs []error
	for len(ws.Windows) > windowBound(s.spec.MaxWindows) {
		win := ws.Windows[0]
		ws.Windows = ws.Windows[1:]
		if !win.Closed && s.spec.Emit == EmitFinal {
			errs = append(errs, s.handOver(c, st, win, false))
		}
	}
	return errors.Join(errs...)
}

// arm sets the timer just past the earliest close of an open session (a
// session closes once stream time is past it), or of a retention.
func (s *Sessions[S, PS, A, PA]) arm(c *group.Context[S, PS], ws *kitpb.WindowSet) error {
	next := int64(0)
	for _, win := range ws.Windows {
		at := s.closes(win.EndMs) + 1
		if win.Closed {
			at += s.spec.Retention.Milliseconds()
		}
		if next == 0 || at < next {
			next = at
		}
	}
	if next == 0 {
		s.op.CancelTimer(c)
		return nil
	}
	return s.op.SetTimer(c, time.UnixMilli(next), group.StreamClock)
}

func (s *Sessions[S, PS, A, PA]) close(c *group.Context[S, PS], _ group.Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	ws := s.set(st)
	err := errors.Join(s.advance(c, st, ws, streamNowFor(c, s.op, ws)), s.arm(c, ws))
	c.SetState(st)
	return err
}
