package group

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// SlidingSpec describes Kafka Streams' sliding windows: windows [start, end]
// (both inclusive) of a fixed Difference, placed by the records — each
// record at t ends a window [t-Difference, t], and one starts just after it,
// [t+1, t+1+Difference], when a later record falls into it — so every set of
// a key's records within Difference of each other is aggregated exactly once.
type SlidingSpec struct {
	Difference time.Duration
	// Grace: a window is closed once stream time is past its end plus grace;
	// a record is late once the window it starts just after itself is closed.
	Grace time.Duration
	// Emit is when results are handed over (default EmitFinal).
	Emit EmitStrategy
}

// SlidingWindows is sliding windows of the given time difference and grace.
func SlidingWindows(difference, grace time.Duration) SlidingSpec {
	return SlidingSpec{Difference: difference, Grace: grace}
}

// Emitting returns s handing results over as e says.
func (s SlidingSpec) Emitting(e EmitStrategy) SlidingSpec { s.Emit = e; return s }

func (s SlidingSpec) validate() error {
	switch {
	case s.Difference < time.Millisecond:
		return fmt.Errorf("sliding window difference %s must be at least 1ms", s.Difference)
	case s.Grace < 0:
		return fmt.Errorf("sliding window grace %s must not be negative", s.Grace)
	case s.Emit != EmitFinal && s.Emit != EmitUpdates:
		return fmt.Errorf("unknown emit strategy %d", s.Emit)
	}
	return nil
}

// Sliding is a sliding-windowed aggregate of each key of a group, with the
// guarantees of Windows (results depend on the records in partition order
// only; EmitFinal hands each window over once, in end order). Its state is
// a kitpb.WindowSet whose records are the key's records some window still
// open may hold: those within Difference plus grace of stream time, at most
// MaxWindowsPerKey of them (beyond, the oldest are forgotten: windows still
// open lose them). A window's custom aggregate is combine folded over its
// records' messages, oldest first.
type Sliding[S any, PS codecs.Message[S], A any, PA codecs.Message[A]] struct {
	g       *Group[S, PS]
	name    string
	spec    SlidingSpec
	set     func(PS) *kitpb.WindowSet
	combine func(acc, rec PA)
	emit    func(c *Context[S, PS], st PS, w Window[A, PA]) error
	timer   string
}

// NewSliding registers a sliding-windowed aggregate named name (unique in the
// group) on g; set and emit as for NewWindows (a Window's End is inclusive
// here). combine may be nil when Add is never given a message.
func NewSliding[A any, PA codecs.Message[A], S any, PS codecs.Message[S]](g *Group[S, PS], name string, spec SlidingSpec, set func(PS) *kitpb.WindowSet, combine func(acc, rec PA), emit func(c *Context[S, PS], st PS, w Window[A, PA]) error) *Sliding[S, PS, A, PA] {
	s := &Sliding[S, PS, A, PA]{g: g, name: name, spec: spec, set: set, combine: combine, emit: emit, timer: kitTimerPrefix + "sliding/" + name}
	if err := spec.validate(); err != nil {
		g.err = errors.Join(g.err, fmt.Errorf("group %s sliding windows %s: %w", g.name, name, err))
	}
	g.onKitTimer("sliding/"+name, s.close)
	return s
}

type span struct{ start, end int64 }

// closedThrough is the latest window end closed at stream time now.
func (s *Sliding[S, PS, A, PA]) closedThrough(now int64) int64 {
	return now - s.spec.Grace.Milliseconds() - 1
}

// left is the window a record at t ends; a record earlier than the
// difference is in [0, difference], as in Kafka Streams.
func (s *Sliding[S, PS, A, PA]) left(t int64) span {
	d := s.spec.Difference.Milliseconds()
	if t < d {
		return span{0, d}
	}
	return span{t - d, t}
}

func (s *Sliding[S, PS, A, PA]) right(t int64) span {
	d := s.spec.Difference.Milliseconds()
	return span{t + 1, t + 1 + d}
}

// candidates are the windows the records place, by end then start, once each.
func (s *Sliding[S, PS, A, PA]) candidates(recs []*kitpb.Window, keep func(span) bool) []span {
	var out []span
	for _, r := range recs {
		for _, w := range []span{s.left(r.StartMs), s.right(r.StartMs)} {
			if keep(w) && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start)) })
	return out
}

// Add adds a record at event time at, with value and (if not nil) its message
// for the custom aggregate, to the sliding windows of its key. Windows stream
// time has closed are handed over first (EmitFinal); a record whose own right
// window [t+1, t+1+difference] is closed is late: counted, kept nowhere, ErrLate.
func (s *Sliding[S, PS, A, PA]) Add(c *Context[S, PS], st PS, at time.Time, value float64, rec PA) error {
	ws := s.set(st)
	t := at.UnixMilli()
	if t < 0 {
		return fmt.Errorf("sliding windows %s: event time %d ms is before the epoch", s.name, t)
	}
	now := streamNowFor(c, ws)
	errs := []error{s.advance(c, st, ws, now)}
	closed := s.closedThrough(now)
	// As Kafka Streams: a record is late once even the window it starts,
	// [t+1, t+1+difference], is closed; before that it may create that window
	// or join open ones, though its own left window may be closed.
	open := s.right(t).end > closed
	if !open {
		ws.Late++
		c.grp.m.lateRecords.WithLabelValues(s.g.name, s.name).Inc()
		errs = append(errs, fmt.Errorf("sliding windows %s: record at %s: %w (stream time %s)", s.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
	}
	nr := &kitpb.Window{StartMs: t, EndMs: t, Count: 1, Sum: value}
	if rec != nil {
		b, err := marshalOpts.Marshal(rec)
		if err != nil {
			return fmt.Errorf("sliding windows %s: record: %w", s.name, err)
		}
		nr.Agg = b
	}
	i, _ := slices.BinarySearchFunc(ws.Records, t, func(r *kitpb.Window, t int64) int {
		if r.StartMs <= t {
			return -1
		}
		return 1
	})
	ws.Records = slices.Insert(ws.Records, i, nr)
	if n := len(ws.Records) - MaxWindowsPerKey; n > 0 {
		ws.Records = slices.Delete(ws.Records, 0, n)
	}
	if s.spec.Emit == EmitUpdates {
		// Every open window the record is in, and the one it starts.
		changed := s.candidates(ws.Records, func(w span) bool {
			return w.end > closed && (w.start <= t && t <= w.end || w == s.right(t))
		})
		for _, w := range changed {
			errs = append(errs, s.handOver(c, st, ws, w))
		}
	}
	errs = append(errs, s.arm(c, ws, closed))
	return errors.Join(errs...)
}

// handOver aggregates the records in w and calls emit, unless w is empty.
func (s *Sliding[S, PS, A, PA]) handOver(c *Context[S, PS], st PS, ws *kitpb.WindowSet, w span) error {
	res := Window[A, PA]{Start: time.UnixMilli(w.start), End: time.UnixMilli(w.end)}
	for _, r := range ws.Records {
		if r.StartMs < w.start || r.StartMs > w.end {
			continue
		}
		res.Count++
		res.Sum += r.Sum
		if len(r.Agg) > 0 && s.combine != nil {
			m := PA(new(A))
			if err := protov2.Unmarshal(r.Agg, m); err != nil {
				return fmt.Errorf("sliding windows %s: record at %d: %w", s.name, r.StartMs, err)
			}
			if res.Agg == nil {
				res.Agg = PA(new(A))
			}
			s.combine(res.Agg, m)
		}
	}
	if res.Count == 0 || s.emit == nil {
		return nil
	}
	return s.emit(c, st, res)
}

// advance hands over (EmitFinal) the windows ending after what was closed
// before and no later than what stream time now closes, in end order, and
// forgets the records no window still open or to come can hold.
func (s *Sliding[S, PS, A, PA]) advance(c *Context[S, PS], st PS, ws *kitpb.WindowSet, now int64) error {
	prev := int64(math.MinInt64)
	if ws.ClosedMs != 0 || len(ws.Records) > 0 {
		prev = s.closedThrough(ws.ClosedMs)
	}
	through := s.closedThrough(now)
	var errs []error
	if through > prev {
		if s.spec.Emit == EmitFinal {
			for _, w := range s.candidates(ws.Records, func(w span) bool { return w.end > prev && w.end <= through }) {
				errs = append(errs, s.handOver(c, st, ws, w))
			}
		}
		ws.ClosedMs = now
	}
	d := s.spec.Difference.Milliseconds()
	ws.Records = slices.DeleteFunc(ws.Records, func(r *kitpb.Window) bool { return r.StartMs+d+1 <= through })
	return errors.Join(errs...)
}

// arm sets the timer just past the close of the earliest window still open.
func (s *Sliding[S, PS, A, PA]) arm(c *Context[S, PS], ws *kitpb.WindowSet, closed int64) error {
	pending := s.candidates(ws.Records, func(w span) bool { return w.end > closed })
	if len(pending) == 0 {
		c.CancelTimer(s.timer)
		return nil
	}
	return c.setTimer(s.timer, time.UnixMilli(pending[0].end+s.spec.Grace.Milliseconds()+1), StreamClock)
}

func (s *Sliding[S, PS, A, PA]) close(c *Context[S, PS], _ Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	ws := s.set(st)
	now := streamNowFor(c, ws)
	err := errors.Join(s.advance(c, st, ws, now), s.arm(c, ws, s.closedThrough(now)))
	c.SetState(st)
	return err
}
