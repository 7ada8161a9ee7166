package streams

import (
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// Windowed is a grouped stream cut into windows on event time.
type Windowed[V any] struct {
	g  Grouped[V]
	w  Windowing
	at func(v *V) time.Time
}

type windowRes = windows.Window[emptypb.Empty, *emptypb.Empty]

// Windowing is a kind of windows of the kit: TimeWindows, SessionWindows or
// SlidingWindows.
type Windowing struct {
	label string
	spec  any // windows.WindowSpec, SessionSpec or SlidingSpec
}

// TimeWindows are tumbling or hopping windows (windows.Tumbling,
// windows.Hopping) with grace and the spec's emit strategy.
func TimeWindows(spec windows.WindowSpec) Windowing {
	return Windowing{label: "time windows", spec: spec}
}

// SessionWindows are sessions of activity (windows.SessionWindows: gap and
// grace) with the spec's emit strategy.
func SessionWindows(spec windows.SessionSpec) Windowing {
	return Windowing{label: "session windows", spec: spec}
}

// SlidingWindows are Kafka Streams' sliding windows (windows.SlidingWindows:
// the largest time difference and grace) with the spec's emit strategy.
func SlidingWindows(spec windows.SlidingSpec) Windowing {
	return Windowing{label: "sliding windows", spec: spec}
}

// register puts w's windows on g, kept in set(state) and handing results to
// emit, and returns how a record at event time at is added to a key's state.
// Each kind is the kit's own (windows.NewWindows, NewSessions, NewSliding),
// so its guarantees hold unchanged.
func register[S any, PS codecs.Message[S]](w Windowing, g *group.Group[S, PS], set func(PS) *kitpb.WindowSet, emit func(*group.Context[S, PS], PS, windowRes) error) func(c *group.Context[S, PS], st PS, at time.Time) error {
	switch spec := w.spec.(type) {
	case windows.SessionSpec:
		s := windows.NewSessions[emptypb.Empty](g, "dsl", spec, set, nil, emit)
		return func(c *group.Context[S, PS], st PS, at time.Time) error { return s.Add(c, st, at, 1, nil) }
	case windows.SlidingSpec:
		s := windows.NewSliding[emptypb.Empty](g, "dsl", spec, set, nil, emit)
		return func(c *group.Context[S, PS], st PS, at time.Time) error { return s.Add(c, st, at, 1, nil) }
	default: // windows.WindowSpec (WindowedBy refuses a zero Windowing)
		s := windows.NewWindows[emptypb.Empty](g, "dsl", w.spec.(windows.WindowSpec), set, emit)
		return func(c *group.Context[S, PS], st PS, at time.Time) error { return s.Add(c, st, at, 1, nil) }
	}
}

// WindowedBy cuts each key's records into windows on event time at (which
// also moves the partition's stream time, closing windows). Under
// windows.EmitFinal (the default) a window's result is handed over once, when
// stream time passes its end plus grace; under windows.EmitUpdates on every
// change.
func (g Grouped[V]) WindowedBy(w Windowing, at func(v *V) time.Time) Windowed[V] {
	if w.spec == nil {
		g.s.n.b.fail("WindowedBy: no windows (use TimeWindows, SessionWindows or SlidingWindows)")
	}
	return Windowed[V]{g: g, w: w, at: at}
}

// WindowKey is the key a windowed result is written under: the record's
// key and the window's start (UTC, RFC 3339), as Kafka Streams' Windowed
// key prints them.
func WindowKey(key string, start time.Time) string {
	return key + "@" + start.UTC().Format(time.RFC3339)
}

// Count counts each key's records per window in group name, whose table
// name+"-table" (value fencestream.kit.v1.WindowSet, the kit's windows:
// views read it with windows.WindowsOf) and timer topic name+"-timers" the
// topology must declare. Its stream is each window's count (under
// WindowKey) when the spec's emit strategy hands it over; a record later
// than its window's grace is counted in the set's late count only. opts are
// the options of the group's group.New, as for Grouped.Aggregate.
func (w Windowed[V]) Count(name string, opts ...group.Opt) Table[wrapperspb.Int64Value] {
	identity := func(st *kitpb.WindowSet) *kitpb.WindowSet { return st }
	return windowed(w, "count", name, identity, nil, func(key string, win windowRes) (string, *wrapperspb.Int64Value) {
		if win.Removed {
			// A session a bridging record merged into another: its
			// result is withdrawn (Kafka Streams' null).
			return WindowKey(key, win.Start), nil
		}
		return WindowKey(key, win.Start), wrapperspb.Int64(win.Count)
	}, opts)
}

// Aggregate keeps each key's *A in group name, whose table name+"-table"
// (value A, so the table is the app's own message, and views and routes
// read it as such) and timer topic name+"-timers" the topology must
// declare. The windows live in the kitpb.WindowSet field set returns
// (creating it when absent, as for windows.NewWindows; nil: A's one field
// of that type; views read it with windows.WindowsOf); add then folds each record that is not late into agg
// in place (nil: none). A record later than its window's grace is counted
// in the set's late count only: add never sees it. Its stream is each
// window's result, under the record's key (the value says which window:
// start, end, count, largest event time, closed), when the spec's emit
// strategy hands it over, for the app to map into its own message; a
// session merged into another is handed over empty (count 0), withdrawing
// it. opts are the options of the group's group.New, as for
// Grouped.Aggregate.
func (w Windowed[V]) Aggregate[A any](name string, set func(agg *A) *kitpb.WindowSet, add func(key string, v *V, agg *A), opts ...group.Opt) Table[kitpb.Window] {
	if set == nil {
		set = windowSetField[A](w.g.s.n.b, name)
	}
	return windowed(w, "aggregate", name, set, add, func(key string, win windowRes) (string, *kitpb.Window) {
		res := &kitpb.Window{StartMs: win.Start.UnixMilli(), EndMs: win.End.UnixMilli(), Count: win.Count, Sum: win.Sum, MaxMs: win.Time.UnixMilli(), Closed: win.Closed}
		if win.Removed {
			res.Count, res.Sum = 0, 0
		}
		return key, res
	}, opts)
}

// windowed compiles a windowed aggregation of kind into group name: its
// state is a *A holding the windows in set(agg); add folds in each record
// that is not late; result is what the table's stream hands over for a
// window.
func windowed[V, A, R any](w Windowed[V], kind, name string, set func(*A) *kitpb.WindowSet, add func(string, *V, *A), result func(key string, win windowRes) (string, *R), opts []group.Opt) Table[R] {
	b := w.g.s.n.b
	a := &stateful{name: name, table: name + "-table", kind: kind + " over " + w.w.label, typ: nameOf[A](), out: nameOf[R](), in: w.g.s.n.typ, input: w.g.s.n, opts: opts}
	b.checkTopic[A]("WindowedBy(...)."+kind, a.table)
	if _, ok := b.topo.Topic(topology.TimersTopicName(name)); !ok {
		b.fail("windowed %s %s: its timer topic %s is not declared (topology.TimersTopic)", kind, name, topology.TimersTopicName(name))
	}
	term := b.add([]*node{w.g.s.n}, a.kind+" -> table "+a.table, a.typ)
	term.term = &terminal{agg: a}
	tn := b.add(nil, "table "+a.table, a.out)
	tn.table = a
	type ctx = group.Context[msg[A], *msg[A]]
	field := func(st *msg[A]) *kitpb.WindowSet {
		if st.v == nil {
			st.v = new(A)
		}
		return set(st.v)
	}
	var addAt func(c *ctx, st *msg[A], at time.Time) error
	a.apply = func(r *run, key string, v any) error {
		c := r.ctx.(*ctx)
		st := c.State()
		if st == nil {
			st = &msg[A]{}
		}
		switch err := addAt(c, st, w.at(v.(*V))); {
		case errors.Is(err, windows.ErrLate): // counted in the set's late count, in no aggregate
		case err != nil:
			return err
		case add != nil:
			add(key, v.(*V), st.v)
		}
		c.SetState(st)
		return nil
	}
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[msg[A]](topo, name, log, a.opts...)
		emits, joins := b.bind(kg)
		addAt = register(w.w, kg, field, func(c *ctx, _ *msg[A], win windowRes) error {
			k, res := result(c.Key(), win)
			return tn.forward(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, k, res)
		})
		for _, r := range a.input.roots() {
			if r.table != nil {
				continue // refused by assign
			}
			group.Stream(kg, r.topic, func(c *ctx, m *msg[V]) error {
				return r.push(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, c.Key(), unwrap(m))
			}, group.EventTime(func(m *msg[V]) time.Time { return w.at(unwrap(m)) }))
		}
		return kg
	}
	b.aggs = append(b.aggs, a)
	return Table[R]{n: tn, a: a}
}

// windowSetField is the accessor of A's one kitpb.WindowSet field, which it
// creates when absent; Build fails when A has none or several.
func windowSetField[A any](b *Builder, name string) func(*A) *kitpb.WindowSet {
	ws := (&kitpb.WindowSet{}).ProtoReflect().Descriptor().FullName()
	var found []protoreflect.FieldDescriptor
	if m, ok := any(new(A)).(proto.Message); ok {
		fs := m.ProtoReflect().Descriptor().Fields()
		for i := range fs.Len() {
			if f := fs.Get(i); f.Message() != nil && f.Cardinality() != protoreflect.Repeated && f.Message().FullName() == ws {
				found = append(found, f)
			}
		}
	}
	if len(found) != 1 {
		b.fail("windowed aggregate %s: %s has %d fields of type %s, not one: pass set", name, nameOf[A](), len(found), ws)
		return nil
	}
	return func(a *A) *kitpb.WindowSet {
		return any(a).(proto.Message).ProtoReflect().Mutable(found[0]).Message().Interface().(*kitpb.WindowSet)
	}
}
