package windows

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
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
	// a record at t is late once t+Difference is before stream time minus
	// grace (as Kafka Streams: even the window it would start is closed).
	Grace time.Duration
	// Emit is when results are handed over (default EmitFinal).
	Emit EmitStrategy
	// MaxWindows bounds the windows a key keeps (default MaxWindowsPerKey);
	// beyond it the oldest are dropped, handed over first if still open.
	MaxWindows int
}

// SlidingWindows is sliding windows of the given time difference and grace.
func SlidingWindows(difference, grace time.Duration) SlidingSpec {
	return SlidingSpec{Difference: difference, Grace: grace}
}

// Emitting returns s handing results over as e says.
func (s SlidingSpec) Emitting(e EmitStrategy) SlidingSpec { s.Emit = e; return s }

// Bounded returns s keeping up to n windows per key instead of
// MaxWindowsPerKey.
func (s SlidingSpec) Bounded(n int) SlidingSpec { s.MaxWindows = n; return s }

func (s SlidingSpec) validate() error {
	switch {
	case s.Difference < time.Millisecond:
		return fmt.Errorf("sliding window difference %s must be at least 1ms", s.Difference)
	case s.Grace < 0:
		return fmt.Errorf("sliding window grace %s must not be negative", s.Grace)
	case s.Emit != EmitFinal && s.Emit != EmitUpdates:
		return fmt.Errorf("unknown emit strategy %d", s.Emit)
	case s.MaxWindows < 0:
		return fmt.Errorf("sliding window bound %d must not be negative", s.MaxWindows)
	}
	return nil
}

// Sliding is a sliding-windowed aggregate of each key of a group, with the
// guarantees of Windows (results depend on the records in partition order
// only; EmitFinal hands each window over once, in start order). It places
// windows as Kafka Streams' KStreamSlidingWindowAggregate does: a record
// updates every open window it falls into and creates, if missing, its own
// left window [t-Difference, t] (from the aggregate of the window ending just
// before it), the right window of the record before it, and its own right
// window (a copy of the aggregate of the later records); a window's aggregate
// is combine folded over its records in arrival order, not event-time order.
// A record whose own left window is already closed updates only the open
// windows; nothing of it is kept to build windows later.
//
// Its state is a kitpb.WindowSet whose windows are the key's windows, each
// with its count, sum, aggregate and largest event time; a window is kept a
// Difference past its close, for building later windows from (Kafka Streams'
// store retention, 2·Difference + Grace), and at most SlidingSpec.MaxWindows.
type Sliding[S any, PS codecs.Message[S], A any, PA codecs.Message[A]] struct {
	op      *group.Operator[S, PS]
	name    string
	spec    SlidingSpec
	set     func(PS) *kitpb.WindowSet
	combine func(acc, rec PA)
	emit    func(c *group.Context[S, PS], st PS, w Window[A, PA]) error
}

// NewSliding registers a sliding-windowed aggregate named name (unique in the
// group) on g; set and emit as for NewWindows (a Window's End is inclusive
// here). combine folds a record's message into a window's aggregate; it may
// be nil when Add is never given a message.
func NewSliding[A any, PA codecs.Message[A], S any, PS codecs.Message[S]](g *group.Group[S, PS], name string, spec SlidingSpec, set func(PS) *kitpb.WindowSet, combine func(acc, rec PA), emit func(c *group.Context[S, PS], st PS, w Window[A, PA]) error) *Sliding[S, PS, A, PA] {
	s := &Sliding[S, PS, A, PA]{op: group.NewOperator(g, "sliding", name), name: name, spec: spec, set: set, combine: combine, emit: emit}
	if err := spec.validate(); err != nil {
		s.op.Refuse(fmt.Errorf("group %s sliding windows %s: %w", g.Name(), name, err))
	}
	s.op.OnTimer(s.close)
	return s
}

// closeTime is Kafka Streams' close time at stream time now: a window ending
// before it is closed.
func (s *Sliding[S, PS, A, PA]) closeTime(now int64) int64 {
	return now - s.spec.Grace.Milliseconds()
}

// Add adds a record at event time at, with value and (if not nil) its message
// for the custom aggregate, to the sliding windows of its key. Windows stream
// time has closed are handed over first (EmitFinal). A record is late when
// t+Difference is before stream time minus grace: counted, in no window,
// ErrLate.
func (s *Sliding[S, PS, A, PA]) Add(c *group.Context[S, PS], st PS, at time.Time, value float64, rec PA) error {
	ws := s.set(st)
	t := at.UnixMilli()
	if t < 0 {
		return fmt.Errorf("sliding windows %s: event time %d ms is before the epoch", s.name, t)
	}
	if err := s.migrate(ws); err != nil {
		return err
	}
	now := streamNowFor(c, s.op, ws)
	errs := []error{s.advance(c, st, ws, now)}
	closeT := s.closeTime(now)
	if t+s.spec.Difference.Milliseconds() < closeT {
		ws.Late++
		s.op.CountLate(c)
		errs = append(errs, fmt.Errorf("sliding windows %s: record at %s: %w (stream time %s)", s.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
	}
	var fold func(PA)
	if rec != nil && s.combine != nil {
		fold = func(agg PA) { s.combine(agg, rec) }
	}
	changed, err := s.place(ws, t, value, fold, closeT)
	if err != nil {
		return err
	}
	if s.spec.Emit == EmitUpdates {
		for _, win := range changed {
			errs = append(errs, s.handOver(c, st, win))
		}
	}
	errs = append(errs, s.evict(c, st, ws), s.arm(c, ws))
	return errors.Join(errs...)
}

// placement is one record's pass over its key's windows.
type placement[A any, PA codecs.Message[A]] struct {
	ws     *kitpb.WindowSet
	d, t   int64
	value  float64
	fold   func(PA)
	closeT int64
	// changed are the windows the record updated or created, in that order.
	changed []*kitpb.Window
}

// update folds the record into win (created if isNew), unless win is
// closed: Kafka Streams' updateWindowAndForward.
func (p *placement[A, PA]) update(win *kitpb.Window, isNew bool) error {
	if win.EndMs < p.closeT {
		return nil
	}
	if err := foldInto(win, p.t, p.value, p.fold); err != nil {
		return fmt.Errorf("window %d: %w", win.StartMs, err)
	}
	if isNew {
		p.put(win)
	}
	p.changed = append(p.changed, win)
	return nil
}

// create makes the window starting at start, holding what from holds (a
// copy; nothing if nil).
func (p *placement[A, PA]) create(start int64, from *kitpb.Window) *kitpb.Window {
	win := &kitpb.Window{StartMs: start, EndMs: start + p.d}
	if from != nil {
		win.Count, win.Sum, win.Agg, win.MaxMs = from.Count, from.Sum, slices.Clone(from.Agg), from.MaxMs
	}
	return win
}

func (p *placement[A, PA]) put(win *kitpb.Window) {
	i, found := slices.BinarySearchFunc(p.ws.Windows, win.StartMs, func(w *kitpb.Window, start int64) int { return cmp.Compare(w.StartMs, start) })
	if found {
		p.ws.Windows[i] = win
		return
	}
	p.ws.Windows = slices.Insert(p.ws.Windows, i, win)
}

// place adds a record at t to the windows of ws as Kafka Streams'
// processInOrder and processEarly do, returning the windows it changed.
func (s *Sliding[S, PS, A, PA]) place(ws *kitpb.WindowSet, t int64, value float64, fold func(PA), closeT int64) ([]*kitpb.Window, error) {
	p := &placement[A, PA]{ws: ws, d: s.spec.Difference.Milliseconds(), t: t, value: value, fold: fold, closeT: closeT}
	d := p.d
	// The windows that may hold the record or feed the ones it creates:
	// starts from t-2d (t-d's left window) to t+1 (its own right window).
	var near []*kitpb.Window
	for _, win := range ws.Windows {
		if win.StartMs >= max(0, t-2*d) && win.StartMs <= t+1 {
			near = append(near, win)
		}
	}
	// exists: a window starting at start was there before the record.
	exists := func(start int64) bool {
		_, ok := slices.BinarySearchFunc(near, start, func(w *kitpb.Window, start int64) int { return cmp.Compare(w.StartMs, start) })
		return ok
	}
	var leftAgg, rightAgg *kitpb.Window
	hasPrev, prev := false, int64(0)
	leftCreated, rightCreated := false, false
	if t < d {
		// Early records share the window [0, d] (no window starts before
		// the epoch).
		var combined *kitpb.Window
		last := -1
		for i, win := range near {
			if win.StartMs != 0 && win.StartMs <= t {
				last = i
			}
		}
		for i, win := range near {
			switch {
			case win.StartMs == 0:
				combined = win
				if win.MaxMs < t {
					hasPrev, prev = true, win.MaxMs
				}
			case win.StartMs <= t:
				if i == last {
					rightAgg = protov2.CloneOf(win)
				}
				if err := p.update(win, false); err != nil {
					return nil, err
				}
			case win.StartMs == t+1:
				rightCreated = true
			}
		}
		if rightAgg == nil && combined != nil && combined.MaxMs > t {
			rightAgg = protov2.CloneOf(combined)
		}
		if !rightCreated && rightAgg != nil && rightAgg.MaxMs > t {
			win := p.create(t+1, rightAgg)
			p.put(win)
			p.changed = append(p.changed, win)
		}
		if hasPrev && !exists(prev+1) {
			if err := p.update(p.create(prev+1, nil), true); err != nil {
				return nil, err
			}
		}
		var err error
		if combined == nil {
			err = p.update(p.create(0, nil), true)
		} else {
			err = p.update(combined, false)
		}
		return p.changed, err
	}
	// The right window's aggregate is what the latest-starting window
	// holding the record held before it: copy only that one.
	last := -1
	for i, win := range near {
		if win.StartMs <= t && win.StartMs+d > t {
			last = i
		}
	}
	for i, win := range near {
		end := win.StartMs + d
		switch {
		case end < t:
			leftAgg = win
			hasPrev, prev = true, win.MaxMs
		case end == t:
			leftCreated = true
			if win.MaxMs < t {
				hasPrev, prev = true, win.MaxMs
			}
			if err := p.update(win, false); err != nil {
				return nil, err
			}
		case win.StartMs <= t:
			if i == last {
				rightAgg = protov2.CloneOf(win)
			}
			if err := p.update(win, false); err != nil {
				return nil, err
			}
		case win.StartMs == t+1:
			rightCreated = true
		}
	}
	// The previous record's right window, when it holds this record.
	prevRight := false
	if hasPrev && !exists(prev+1) && prev+1+d >= t {
		prevRight = true
		if err := p.update(p.create(prev+1, nil), true); err != nil {
			return nil, err
		}
	}
	// The record's left window, from the window ending just before it when
	// the previous record is in it. (When the previous record's right window
	// just created starts at t-d, it is this one, with the same contents.)
	if !leftCreated && !(prevRight && prev+1 == t-d) {
		var from *kitpb.Window
		if hasPrev && t-d <= prev {
			from = leftAgg
		}
		if err := p.update(p.create(t-d, from), true); err != nil {
			return nil, err
		}
	}
	// The record's right window, when later records exist: what the window
	// holding the record and them held before it.
	if !rightCreated && rightAgg != nil && rightAgg.MaxMs > t {
		win := p.create(t+1, rightAgg)
		p.put(win)
		p.changed = append(p.changed, win)
	}
	return p.changed, nil
}

// migrate turns state written before windows were kept (the key's records in
// WindowSet.records) into windows, replaying the records in event-time order
// into every window they place, once; windows that had closed by then were
// handed over already, and are marked closed.
func (s *Sliding[S, PS, A, PA]) migrate(ws *kitpb.WindowSet) error {
	if len(ws.Records) == 0 {
		return nil
	}
	recs := ws.Records
	ws.Records = nil
	defer func() {
		closeT := s.closeTime(ws.ClosedMs)
		for _, win := range ws.Windows {
			win.Closed = win.EndMs < closeT
		}
	}()
	for _, r := range recs {
		var fold func(PA)
		if len(r.Agg) > 0 && s.combine != nil {
			m := PA(new(A))
			if err := protov2.Unmarshal(r.Agg, m); err != nil {
				return fmt.Errorf("sliding windows %s: record at %d: %w", s.name, r.StartMs, err)
			}
			fold = func(agg PA) { s.combine(agg, m) }
		}
		if _, err := s.place(ws, r.StartMs, r.Sum, fold, math.MinInt64); err != nil {
			return fmt.Errorf("sliding windows %s: %w", s.name, err)
		}
	}
	return nil
}

// handOver calls emit with a window's result.
func (s *Sliding[S, PS, A, PA]) handOver(c *group.Context[S, PS], st PS, win *kitpb.Window) error {
	if s.emit == nil {
		return nil
	}
	res, err := windowOf[A, PA](win)
	if err != nil {
		return fmt.Errorf("sliding windows %s: %w", s.name, err)
	}
	return s.emit(c, st, res)
}

// advance closes, in start order, the windows ending before the close time
// at stream time now, handing each over under EmitFinal, and drops windows a
// Difference past their close (no record that is not late can reach them).
func (s *Sliding[S, PS, A, PA]) advance(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet, now int64) error {
	closeT := s.closeTime(now)
	var errs []error
	for _, win := range ws.Windows {
		if win.Closed || win.EndMs >= closeT {
			continue
		}
		win.Closed = true
		if s.spec.Emit == EmitFinal {
			errs = append(errs, s.handOver(c, st, win))
		}
	}
	ws.ClosedMs = max(ws.ClosedMs, now)
	d := s.spec.Difference.Milliseconds()
	ws.Windows = slices.DeleteFunc(ws.Windows, func(win *kitpb.Window) bool { return win.EndMs+d <= closeT })
	return errors.Join(errs...)
}

// evict keeps the set within its bound, dropping the oldest windows (handed
// over first if open, under EmitFinal).
func (s *Sliding[S, PS, A, PA]) evict(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet) error {
	var errs []error
	for len(ws.Windows) > windowBound(s.spec.MaxWindows) {
		win := ws.Windows[0]
		ws.Windows = ws.Windows[1:]
		if !win.Closed && s.spec.Emit == EmitFinal {
			errs = append(errs, s.handOver(c, st, win))
		}
	}
	return errors.Join(errs...)
}

// arm sets the timer at the earliest stream time that closes an open window
// (its end plus grace plus 1 ms) or drops a closed one.
func (s *Sliding[S, PS, A, PA]) arm(c *group.Context[S, PS], ws *kitpb.WindowSet) error {
	grace, d := s.spec.Grace.Milliseconds(), s.spec.Difference.Milliseconds()
	next := int64(0)
	for _, win := range ws.Windows {
		at := win.EndMs + grace + 1
		if win.Closed {
			at = win.EndMs + d + grace
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

func (s *Sliding[S, PS, A, PA]) close(c *group.Context[S, PS], _ group.Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	ws := s.set(st)
	if err := s.migrate(ws); err != nil {
		return err
	}
	err := errors.Join(s.advance(c, st, ws, streamNowFor(c, s.op, ws)), s.arm(c, ws))
	c.SetState(st)
	return err
}
