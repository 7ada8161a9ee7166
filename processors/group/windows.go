package group

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/kitpb"
)

var lateRecords = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "fencestream_window_late_records_total",
	Help: "Records that fell only into windows already closed (end plus grace passed in stream time); dropped from the aggregate.",
}, []string{"group", "windows"})

// ErrLate is returned by Windows.Add for a record that falls only into
// windows already closed. The record is counted (in the window set and in
// fencestream_window_late_records_total) and left out of every aggregate; the
// handler may ignore the error (drop) or return it (dead-letter as invalid).
var ErrLate = errors.New("record is later than its windows' grace")

// MaxWindowsPerKey bounds the windows of one window set.
const MaxWindowsPerKey = 1024

// WindowSpec describes windows on event time.
type WindowSpec struct {
	// Size is the length of a window, [start, start+Size).
	Size time.Duration
	// Advance is the distance between window starts: Size for tumbling
	// windows, less for hopping (overlapping) ones. Window starts are
	// multiples of Advance since the Unix epoch.
	Advance time.Duration
	// Grace is how long after its end, in stream time, a window still takes
	// records; then its timer closes it and its final result is handed over.
	Grace time.Duration
	// Retention is how long after its end, in stream time, a closed window is
	// kept in the state (for views); 0 drops it when it closes. It bounds the
	// number of windows a key keeps.
	Retention time.Duration
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

func (s WindowSpec) validate() error {
	switch {
	case s.Size < time.Millisecond || s.Advance < time.Millisecond:
		return fmt.Errorf("window size %s and advance %s must be at least 1ms", s.Size, s.Advance)
	case s.Advance > s.Size:
		return fmt.Errorf("window advance %s is larger than the size %s: records between windows would be lost", s.Advance, s.Size)
	case s.Grace < 0 || s.Retention < 0:
		return fmt.Errorf("window grace %s and retention %s must not be negative", s.Grace, s.Retention)
	case s.maxWindows() > MaxWindowsPerKey:
		return fmt.Errorf("windows of %s every %s with grace %s and retention %s keep up to %d windows per key, above %d", s.Size, s.Advance, s.Grace, s.Retention, s.maxWindows(), MaxWindowsPerKey)
	}
	return nil
}

// maxWindows is how many windows a key needs at most: those still open or
// retained at any stream time, plus one.
func (s WindowSpec) maxWindows() int {
	return int((s.Size+s.Grace+s.Retention)/s.Advance) + 2
}

// starts returns the starts of the windows containing at, oldest first.
func (s WindowSpec) starts(atMs int64) []int64 {
	adv, size := s.Advance.Milliseconds(), s.Size.Milliseconds()
	last := atMs - ((atMs%adv)+adv)%adv // floor to a multiple of adv, negative times too
	var out []int64
	for st := last; st > atMs-size; st -= adv {
		out = append(out, st)
	}
	slices.Reverse(out)
	return out
}

// Window is one window's result.
type Window[A any, PA codecs.Message[A]] struct {
	Start, End time.Time
	// Count is the number of records added; Sum the sum of their values.
	Count int64
	Sum   float64
	// Agg is the custom aggregate (nil until a fold set it).
	Agg PA
	// Closed: final, the grace has passed.
	Closed bool
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
// WindowsOf); stream-time timers close the windows.
type Windows[S any, PS codecs.Message[S], A any, PA codecs.Message[A]] struct {
	g      *Group[S, PS]
	name   string
	spec   WindowSpec
	set    func(PS) *kitpb.WindowSet
	closed func(c *Context[S, PS], st PS, w Window[A, PA]) error
	timer  string
}

// NewWindows registers a windowed aggregate named name (unique in the group)
// on g. set returns the WindowSet field of a key's state, creating it when
// absent (e.g. `if st.Hourly == nil { st.Hourly = &kitpb.WindowSet{} }; return
// st.Hourly`). closed, if not nil, is called once per window when stream time
// passes its end plus grace, in start order, with the key's state (which the
// kit stores afterwards): emit the final result there. It runs in a timer
// handler, so what it emits is effectively-once. The group needs timers
// declared (topology.Processor.Timers).
func NewWindows[S any, PS codecs.Message[S], A any, PA codecs.Message[A]](g *Group[S, PS], name string, spec WindowSpec, set func(PS) *kitpb.WindowSet, closed func(c *Context[S, PS], st PS, w Window[A, PA]) error) *Windows[S, PS, A, PA] {
	w := &Windows[S, PS, A, PA]{g: g, name: name, spec: spec, set: set, closed: closed, timer: kitTimerPrefix + "window/" + name}
	if err := spec.validate(); err != nil {
		g.err = errors.Join(g.err, fmt.Errorf("group %s windows %s: %w", g.name, name, err))
	}
	g.onKitTimer("window/"+name, w.close)
	return w
}

// Add adds a record at event time at to every window containing it: Count
// grows by one, Sum by value, and fold (if not nil) updates the custom
// aggregate. st is the key's state, which the handler stores (SetState). A
// record whose windows are all closed is late: ErrLate.
func (w *Windows[S, PS, A, PA]) Add(c *Context[S, PS], st PS, at time.Time, value float64, fold func(agg PA)) error {
	ws := w.set(st)
	atMs := at.UnixMilli()
	added := false
	for _, start := range w.spec.starts(atMs) {
		end := start + w.spec.Size.Milliseconds()
		if end+w.spec.Grace.Milliseconds() <= ws.GetClosedMs() {
			continue // closed (or passed while the key had no window there)
		}
		win := findWindow(ws, start)
		if win == nil {
			win = &kitpb.Window{StartMs: start, EndMs: end}
			ws.Windows = append(ws.Windows, win)
			slices.SortFunc(ws.Windows, func(a, b *kitpb.Window) int { return cmp.Compare(a.StartMs, b.StartMs) })
		}
		if win.Closed {
			continue
		}
		win.Count++
		win.Sum += value
		if fold != nil {
			agg := PA(new(A))
			if len(win.Agg) > 0 {
				if err := protov2.Unmarshal(win.Agg, agg); err != nil {
					return fmt.Errorf("windows %s: aggregate of window %d: %w", w.name, start, err)
				}
			}
			fold(agg)
			b, err := marshalOpts.Marshal(agg)
			if err != nil {
				return fmt.Errorf("windows %s: aggregate: %w", w.name, err)
			}
			win.Agg = b
		}
		added = true
	}
	if !added {
		ws.Late++
		lateRecords.WithLabelValues(w.g.name, w.name).Inc()
		return fmt.Errorf("windows %s: record at %s: %w (closed through %s)", w.name, at.UTC().Format(time.RFC3339), ErrLate, time.UnixMilli(ws.GetClosedMs()).UTC().Format(time.RFC3339))
	}
	if err := w.evict(c, st, ws); err != nil {
		return err
	}
	return w.arm(c, ws)
}

func findWindow(ws *kitpb.WindowSet, start int64) *kitpb.Window {
	for _, win := range ws.Windows {
		if win.StartMs == start {
			return win
		}
	}
	return nil
}

// evict keeps the set within its bound: records far ahead of stream time open
// windows beyond what the spec needs; the oldest windows then close early
// (their results handed over as final), and records for them become late.
func (w *Windows[S, PS, A, PA]) evict(c *Context[S, PS], st PS, ws *kitpb.WindowSet) error {
	var errs []error
	for len(ws.Windows) > w.spec.maxWindows() {
		win := ws.Windows[0]
		ws.Windows = ws.Windows[1:]
		ws.ClosedMs = max(ws.ClosedMs, win.EndMs+w.spec.Grace.Milliseconds())
		if !win.Closed && w.closed != nil {
			win.Closed = true
			res, err := windowOf[A, PA](win)
			errs = append(errs, err)
			if err == nil {
				errs = append(errs, w.closed(c, st, res))
			}
		}
	}
	return errors.Join(errs...)
}

// arm sets the set's timer at the earliest close of its open windows.
func (w *Windows[S, PS, A, PA]) arm(c *Context[S, PS], ws *kitpb.WindowSet) error {
	next := int64(0)
	for _, win := range ws.Windows {
		if !win.Closed {
			at := win.EndMs + w.spec.Grace.Milliseconds()
			if next == 0 || at < next {
				next = at
			}
		}
	}
	if next == 0 {
		c.CancelTimer(w.timer)
		return nil
	}
	return c.setTimer(w.timer, time.UnixMilli(next), StreamClock)
}

// close is the windows' timer: every open window whose end plus grace the
// tick's stream time has passed closes, oldest first; closed windows past
// their retention leave the state.
func (w *Windows[S, PS, A, PA]) close(c *Context[S, PS], _ Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	ws := w.set(st)
	now := c.StreamTime().UnixMilli()
	grace, keep := w.spec.Grace.Milliseconds(), w.spec.Retention.Milliseconds()
	var errs []error
	for _, win := range ws.Windows {
		if win.Closed || win.EndMs+grace > now {
			continue
		}
		win.Closed = true
		if w.closed != nil {
			res, err := windowOf[A, PA](win)
			errs = append(errs, err)
			if err == nil {
				errs = append(errs, w.closed(c, st, res))
			}
		}
	}
	ws.ClosedMs = max(ws.ClosedMs, now)
	ws.Windows = slices.DeleteFunc(ws.Windows, func(win *kitpb.Window) bool { return win.Closed && win.EndMs+keep <= now })
	errs = append(errs, w.arm(c, ws))
	c.SetState(st)
	return errors.Join(errs...)
}

func windowOf[A any, PA codecs.Message[A]](win *kitpb.Window) (Window[A, PA], error) {
	res := Window[A, PA]{Start: time.UnixMilli(win.GetStartMs()), End: time.UnixMilli(win.GetEndMs()), Count: win.GetCount(), Sum: win.GetSum(), Closed: win.GetClosed()}
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
