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

// ErrLate is returned by Windows.Add for a record that falls only into
// windows already closed. The record is counted (in the window set and in
// fencestream_window_late_records_total) and left out of every aggregate; the
// handler may ignore the error (drop) or return it (dead-letter as invalid).
var ErrLate = errors.New("record is later than its windows' grace")

// marshalOpts encodes aggregates and joined records deterministically: a
// replay writes the same state bytes.
var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// MaxWindowsPerKey is the default bound on the windows of one window set (a
// key's windows, sessions or sliding windows); each spec's Bounded raises it
// (a day of grace on short windows, ksqlDB's default, needs more).
const MaxWindowsPerKey = 1024

// EmitStrategy says when a window set hands its results over.
type EmitStrategy int

const (
	// EmitFinal hands each window over once, when stream time reaches its
	// end plus grace (Kafka Streams' suppress(untilWindowCloses) or
	// emitStrategy onWindowClose, ksqlDB's EMIT FINAL). The default.
	EmitFinal EmitStrategy = iota
	// EmitUpdates hands a window over after every record that changes it,
	// open (Kafka Streams' onWindowUpdate, ksqlDB's EMIT CHANGES): the last
	// result of a window equals its final one, and nothing more is handed
	// over when it closes.
	EmitUpdates
)

// WindowSpec describes windows on event time.
type WindowSpec struct {
	// Size is the length of a window, [start, start+Size).
	Size time.Duration
	// Advance is the distance between window starts: Size for tumbling
	// windows, less for hopping (overlapping) ones. Window starts are
	// multiples of Advance since the Unix epoch, never before it (as in Kafka
	// Streams: a record at 0 with size 10 and advance 5 is only in [0, 10)).
	Advance time.Duration
	// Grace is how long after its end, in stream time, a window still takes
	// records: a record is late iff the partition's stream time at its
	// arrival is at or past its window's end plus grace.
	Grace time.Duration
	// Retention is how long after its end, in stream time, a closed window is
	// kept in the state (for views); 0 drops it when it closes. It bounds the
	// number of windows a key keeps.
	Retention time.Duration
	// Emit is when results are handed over (default EmitFinal).
	Emit EmitStrategy
	// MaxWindows bounds the windows a key keeps (default MaxWindowsPerKey):
	// a spec needing more (Size+Grace+Retention over Advance, plus two) is
	// refused when the group is built.
	MaxWindows int
}

// Tumbling is windows of size, back to back, taking records until grace after
// their end.
func Tumbling(size, grace time.Duration) WindowSpec {
	return WindowSpec{Size: size, Advance: size, Grace: grace}
}

// Hopping is windows of size starting every advance (each record counts in
// size/advance windows), taking records until grace after their end.
func Hopping(size, advance, grace time.Duration) WindowSpec {
	return WindowSpec{Size: size, Advance: advance, Grace: grace}
}

// Retain returns s keeping closed windows for d after their end.
func (s WindowSpec) Retain(d time.Duration) WindowSpec { s.Retention = d; return s }

// Emitting returns s handing results over as e says.
func (s WindowSpec) Emitting(e EmitStrategy) WindowSpec { s.Emit = e; return s }

// Bounded returns s keeping up to n windows per key instead of
// MaxWindowsPerKey. Each window is a few dozen bytes of the key's state plus
// its custom aggregate, and the whole set is rewritten with every record of
// the key.
func (s WindowSpec) Bounded(n int) WindowSpec { s.MaxWindows = n; return s }

// windowBound is the bound a spec's MaxWindows states, 0 meaning the default.
func windowBound(n int) int {
	if n == 0 {
		return MaxWindowsPerKey
	}
	return n
}

func (s WindowSpec) validate() error {
	switch {
	case s.Size < time.Millisecond || s.Advance < time.Millisecond:
		return fmt.Errorf("window size %s and advance %s must be at least 1ms", s.Size, s.Advance)
	case s.Advance > s.Size:
		return fmt.Errorf("window advance %s is larger than the size %s: records between windows would be lost", s.Advance, s.Size)
	case s.Grace < 0 || s.Retention < 0:
		return fmt.Errorf("window grace %s and retention %s must not be negative", s.Grace, s.Retention)
	case s.Emit != EmitFinal && s.Emit != EmitUpdates:
		return fmt.Errorf("unknown emit strategy %d", s.Emit)
	case s.MaxWindows < 0:
		return fmt.Errorf("window bound %d must not be negative", s.MaxWindows)
	case s.maxWindows() > windowBound(s.MaxWindows):
		return fmt.Errorf("windows of %s every %s with grace %s and retention %s keep up to %d windows per key, above the bound %d (raise it with Bounded)", s.Size, s.Advance, s.Grace, s.Retention, s.maxWindows(), windowBound(s.MaxWindows))
	}
	return nil
}

// maxWindows is how many windows a key needs at most: those still open or
// retained at any stream time, plus one.
func (s WindowSpec) maxWindows() int {
	return int((s.Size+s.Grace+s.Retention)/s.Advance) + 2
}

// starts returns the starts of the windows containing at, oldest first:
// multiples of Advance from max(0, at-Size+Advance) to at, as Kafka Streams'
// TimeWindows.windowsFor. None for a time before the epoch.
func (s WindowSpec) starts(atMs int64) []int64 {
	if atMs < 0 {
		return nil
	}
	adv, size := s.Advance.Milliseconds(), s.Size.Milliseconds()
	first := max(0, atMs-size+adv) / adv * adv
	var out []int64
	for st := first; st <= atMs; st += adv {
		out = append(out, st)
	}
	return out
}

// Window is one window's result.
type Window[A any, PA codecs.Message[A]] struct {
	Start, End time.Time
	// Time is the result's event time, as Kafka Streams stamps a windowed
	// result: the largest event time of the records in the window (for a
	// session, its End; for a Removed session, the End it had).
	Time time.Time
	// Count is the number of records added; Sum the sum of their values.
	Count int64
	Sum   float64
	// Agg is the custom aggregate (nil until a fold set it).
	Agg PA
	// Closed: final, the grace has passed.
	Closed bool
	// Removed: a session absorbed into another by a bridging record, handed
	// over under EmitUpdates so a reader can drop it (Sessions).
	Removed bool
}

// Mean is Sum/Count, or 0 for an empty window.
func (w Window[A, PA]) Mean() float64 {
	if w.Count == 0 {
		return 0
	}
	return w.Sum / float64(w.Count)
}

// Windows is a windowed aggregate of each key of a group: counts, sums and an
// optional custom aggregate of type *A per window. Its state is a
// kitpb.WindowSet inside the application's state (so views read it, see
// WindowsOf); stream-time timers close the windows of keys that receive no
// more records.
//
// Its results are a function of the input records in partition order only:
// whether a record is late, and so what every final result holds, depends on
// the partition's stream time at the record's arrival, never on when the
// timers fire. A window is closed at the first of: a record of the key
// arriving at a stream time at or past its end plus grace (Add closes it
// first), or its timer firing; both hand over the same result.
type Windows[S any, PS codecs.Message[S], A any, PA codecs.Message[A]] struct {
	op   *group.Operator[S, PS]
	name string
	spec WindowSpec
	set  func(PS) *kitpb.WindowSet
	emit func(c *group.Context[S, PS], st PS, w Window[A, PA]) error
}

// NewWindows registers a windowed aggregate named name (unique in the group)
// on g. set returns the WindowSet field of a key's state, creating it when
// absent (e.g. `if st.Hourly == nil { st.Hourly = &kitpb.WindowSet{} }; return
// st.Hourly`). emit, if not nil, is called with the key's state (which the kit
// or the handler stores afterwards) to hand results over: under EmitFinal once
// per window when it closes, in start order; under EmitUpdates after each
// change. It runs in the record handler (Add) or a timer handler, so what it
// emits is effectively-once; it should stamp what it writes from the window,
// not from Context.StreamTime, which differs between the two. The group needs
// timers declared (topology.Processor.Timers), and flows from its inputs and
// its timer topic to what emit writes. The aggregate's type comes first, so
// with a nil emit only it is spelled: NewWindows[Agg](g, ...).
func NewWindows[A any, PA codecs.Message[A], S any, PS codecs.Message[S]](g *group.Group[S, PS], name string, spec WindowSpec, set func(PS) *kitpb.WindowSet, emit func(c *group.Context[S, PS], st PS, w Window[A, PA]) error) *Windows[S, PS, A, PA] {
	w := &Windows[S, PS, A, PA]{op: group.NewOperator(g, "window", name), name: name, spec: spec, set: set, emit: emit}
	if err := spec.validate(); err != nil {
		w.op.Refuse(fmt.Errorf("group %s windows %s: %w", g.Name(), name, err))
	}
	w.op.OnTimer(w.close)
	return w
}

// Add adds a record at event time at to every window containing it that is
// still open at the partition's stream time: Count grows by one, Sum by value,
// and fold (if not nil) updates the custom aggregate. st is the key's state,
// which the handler stores (SetState). Windows of the key that stream time
// has closed are closed (and handed over) first. A record whose windows are
// all closed is late: counted, in no aggregate, and ErrLate returned (joined
// with any error of handing results over).
func (w *Windows[S, PS, A, PA]) Add(c *group.Context[S, PS], st PS, at time.Time, value float64, fold func(agg PA)) error {
	ws := w.set(st)
	atMs := at.UnixMilli()
	if atMs < 0 {
		return fmt.Errorf("windows %s: event time %d ms is before the epoch", w.name, atMs)
	}
	now := streamNowFor(c, w.op, ws)
	errs := []error{w.advance(c, st, ws, now)}
	size, grace := w.spec.Size.Milliseconds(), w.spec.Grace.Milliseconds()
	var changed []*kitpb.Window
	for _, start := range w.spec.starts(atMs) {
		end := start + size
		if end+grace <= now {
			continue // closed: stream time reached its end plus grace
		}
		win := findWindow(ws, start)
		if win == nil {
			win = &kitpb.Window{StartMs: start, EndMs: end}
			ws.Windows = append(ws.Windows, win)
			slices.SortFunc(ws.Windows, func(a, b *kitpb.Window) int { return cmp.Compare(a.StartMs, b.StartMs) })
		}
		if win.Closed {
			continue // closed early by the bound (evict)
		}
		if err := foldInto(win, atMs, value, fold); err != nil {
			return fmt.Errorf("windows %s: window %d: %w", w.name, start, err)
		}
		changed = append(changed, win)
	}
	if len(changed) == 0 {
		ws.Late++
		w.op.CountLate(c)
		errs = append(errs, fmt.Errorf("windows %s: record at %s: %w (stream time %s)", w.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
	}
	if w.spec.Emit == EmitUpdates {
		for _, win := range changed {
			errs = append(errs, w.handOver(c, st, win))
		}
	}
	errs = append(errs, w.evict(c, st, ws), w.arm(c, ws))
	return errors.Join(errs...)
}

// streamNowFor is the stream time a window set is judged at: the partition's
// (the tick's, in a timer handler), or the set's own record of it when that is
// later — after a restart the partition's stream time starts unknown, and the
// set must not reopen what it closed. The partition's clock is raised to it,
// so other keys see no earlier time than this one did.
func streamNowFor[S any, PS codecs.Message[S]](c *group.Context[S, PS], op *group.Operator[S, PS], ws *kitpb.WindowSet) int64 {
	return op.StreamTime(c, time.UnixMilli(ws.GetClosedMs())).UnixMilli()
}

// foldInto adds one record at event time atMs to a window.
func foldInto[A any, PA codecs.Message[A]](win *kitpb.Window, atMs int64, value float64, fold func(agg PA)) error {
	win.Count++
	win.Sum += value
	win.MaxMs = max(win.MaxMs, atMs)
	if fold == nil {
		return nil
	}
	agg := PA(new(A))
	if len(win.Agg) > 0 {
		if err := protov2.Unmarshal(win.Agg, agg); err != nil {
			return fmt.Errorf("aggregate: %w", err)
		}
	}
	fold(agg)
	b, err := marshalOpts.Marshal(agg)
	if err != nil {
		return fmt.Errorf("aggregate: %w", err)
	}
	win.Agg = b
	return nil
}

func findWindow(ws *kitpb.WindowSet, start int64) *kitpb.Window {
	for _, win := range ws.Windows {
		if win.StartMs == start {
			return win
		}
	}
	return nil
}

// handOver calls emit with a window's result.
func (w *Windows[S, PS, A, PA]) handOver(c *group.Context[S, PS], st PS, win *kitpb.Window) error {
	if w.emit == nil {
		return nil
	}
	res, err := windowOf[A, PA](win)
	if err != nil {
		return err
	}
	return w.emit(c, st, res)
}

// advance closes, oldest first, every open window whose end plus grace is at
// or before stream time now, handing each over under EmitFinal, and drops
// closed windows past their retention. The same now closes the same windows
// whichever of Add and the timer gets there first.
func (w *Windows[S, PS, A, PA]) advance(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet, now int64) error {
	grace, keep := w.spec.Grace.Milliseconds(), w.spec.Retention.Milliseconds()
	var errs []error
	for _, win := range ws.Windows {
		if win.Closed || win.EndMs+grace > now {
			continue
		}
		win.Closed = true
		if w.spec.Emit == EmitFinal {
			errs = append(errs, w.handOver(c, st, win))
		}
	}
	ws.ClosedMs = max(ws.ClosedMs, now)
	ws.Windows = slices.DeleteFunc(ws.Windows, func(win *kitpb.Window) bool { return win.Closed && win.EndMs+keep <= now })
	return errors.Join(errs...)
}

// evict keeps the set within its bound. Windows open at a stream time stay
// within it; only records ahead of stream time (event times beyond the wall
// clock, which stream time does not follow) open more. The oldest windows
// then close early (handed over as final), and records for them become late.
func (w *Windows[S, PS, A, PA]) evict(c *group.Context[S, PS], st PS, ws *kitpb.WindowSet) error {
	var errs []error
	for len(ws.Windows) > w.spec.maxWindows() {
		win := ws.Windows[0]
		ws.Windows = ws.Windows[1:]
		ws.ClosedMs = max(ws.ClosedMs, win.EndMs+w.spec.Grace.Milliseconds())
		if !win.Closed {
			win.Closed = true
			if w.spec.Emit == EmitFinal {
				errs = append(errs, w.handOver(c, st, win))
			}
		}
	}
	return errors.Join(errs...)
}

// arm sets the set's timer at the earliest close of its open windows, or at
// the earliest end of retention of its closed ones.
func (w *Windows[S, PS, A, PA]) arm(c *group.Context[S, PS], ws *kitpb.WindowSet) error {
	next := int64(0)
	for _, win := range ws.Windows {
		at := win.EndMs + w.spec.Grace.Milliseconds()
		if win.Closed {
			at = win.EndMs + w.spec.Retention.Milliseconds()
		}
		if next == 0 || at < next {
			next = at
		}
	}
	if next == 0 {
		w.op.CancelTimer(c)
		return nil
	}
	return w.op.SetTimer(c, time.UnixMilli(next), group.StreamClock)
}

// close is the windows' timer: advance to the tick's stream time.
func (w *Windows[S, PS, A, PA]) close(c *group.Context[S, PS], _ group.Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	ws := w.set(st)
	err := errors.Join(w.advance(c, st, ws, streamNowFor(c, w.op, ws)), w.arm(c, ws))
	c.SetState(st)
	return err
}

func windowOf[A any, PA codecs.Message[A]](win *kitpb.Window) (Window[A, PA], error) {
	res := Window[A, PA]{Start: time.UnixMilli(win.GetStartMs()), End: time.UnixMilli(win.GetEndMs()), Time: time.UnixMilli(win.GetMaxMs()), Count: win.GetCount(), Sum: win.GetSum(), Closed: win.GetClosed()}
	if len(win.GetAgg()) > 0 {
		res.Agg = PA(new(A))
		if err := protov2.Unmarshal(win.GetAgg(), res.Agg); err != nil {
			return res, fmt.Errorf("window %d: aggregate: %w", win.GetStartMs(), err)
		}
	}
	return res, nil
}

// WindowsOf decodes a window set as read from a key's state (a view, a
// handler), oldest first.
func WindowsOf[A any, PA codecs.Message[A]](ws *kitpb.WindowSet) ([]Window[A, PA], error) {
	out := make([]Window[A, PA], 0, len(ws.GetWindows()))
	for _, win := range ws.GetWindows() {
		res, err := windowOf[A, PA](win)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}
