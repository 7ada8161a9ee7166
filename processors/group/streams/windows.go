package streams

import (
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

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

type (
	windowCtx = group.Context[kitpb.WindowSet, *kitpb.WindowSet]
	windowRes = windows.Window[wrapperspb.Int64Value, *wrapperspb.Int64Value]
)

// Windowing is a kind of windows of the kit: TimeWindows, SessionWindows or
// SlidingWindows.
type Windowing struct {
	label string
	// register puts the windows on g and returns how a record is added.
	register func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit func(*windowCtx, *kitpb.WindowSet, windowRes) error) func(c *windowCtx, st *kitpb.WindowSet, at time.Time) error
}

func identity(st *kitpb.WindowSet) *kitpb.WindowSet { return st }

// TimeWindows are tumbling or hopping windows (windows.Tumbling,
// windows.Hopping) with grace and the spec's emit strategy.
func TimeWindows(spec windows.WindowSpec) Windowing {
	return Windowing{label: "time windows", register: func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit func(*windowCtx, *kitpb.WindowSet, windowRes) error) func(*windowCtx, *kitpb.WindowSet, time.Time) error {
		w := windows.NewWindows[wrapperspb.Int64Value](g, "dsl", spec, identity, emit)
		return func(c *windowCtx, st *kitpb.WindowSet, at time.Time) error { return w.Add(c, st, at, 1, nil) }
	}}
}

// SessionWindows are sessions of activity (windows.SessionWindows: gap and
// grace) with the spec's emit strategy.
func SessionWindows(spec windows.SessionSpec) Windowing {
	return Windowing{label: "session windows", register: func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit func(*windowCtx, *kitpb.WindowSet, windowRes) error) func(*windowCtx, *kitpb.WindowSet, time.Time) error {
		w := windows.NewSessions[wrapperspb.Int64Value](g, "dsl", spec, identity, nil, emit)
		return func(c *windowCtx, st *kitpb.WindowSet, at time.Time) error { return w.Add(c, st, at, 1, nil) }
	}}
}

// SlidingWindows are Kafka Streams' sliding windows (windows.SlidingWindows:
// the largest time difference and grace) with the spec's emit strategy.
func SlidingWindows(spec windows.SlidingSpec) Windowing {
	return Windowing{label: "sliding windows", register: func(g *group.Group[kitpb.WindowSet, *kitpb.WindowSet], emit func(*windowCtx, *kitpb.WindowSet, windowRes) error) func(*windowCtx, *kitpb.WindowSet, time.Time) error {
		w := windows.NewSliding[wrapperspb.Int64Value](g, "dsl", spec, identity, nil, emit)
		return func(c *windowCtx, st *kitpb.WindowSet, at time.Time) error { return w.Add(c, st, at, 1, nil) }
	}}
}

// WindowedBy cuts each key's records into windows on event time at (which
// also moves the partition's stream time, closing windows). Under
// windows.EmitFinal (the default) a window's result is handed over once, when
// stream time passes its end plus grace; under windows.EmitUpdates on every
// change.
func (g Grouped[V]) WindowedBy(w Windowing, at func(v *V) time.Time) Windowed[V] {
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
	b := w.g.s.n.b
	a := &stateful{name: name, table: name + "-table", kind: "count over " + w.w.label, typ: nameOf[kitpb.WindowSet](), out: nameOf[wrapperspb.Int64Value](), in: w.g.s.n.typ, input: w.g.s.n, opts: opts}
	b.checkTopic[kitpb.WindowSet]("WindowedBy(...).Count", a.table)
	if _, ok := b.topo.Topic(topology.TimersTopicName(name)); !ok {
		b.fail("windowed count %s: its timer topic %s is not declared (topology.TimersTopic)", name, topology.TimersTopicName(name))
	}
	term := b.add([]*node{w.g.s.n}, a.kind+" -> table "+a.table, a.typ)
	term.term = &terminal{agg: a}
	tn := b.add(nil, "table "+a.table, a.out)
	tn.table = a
	type ctx = windowCtx
	var add func(c *windowCtx, st *kitpb.WindowSet, at time.Time) error
	a.apply = func(r *run, key string, v any) error {
		c := r.ctx.(*ctx)
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		if err := add(c, st, w.at(v.(*V))); err != nil && !errors.Is(err, windows.ErrLate) {
			return err
		}
		c.SetState(st)
		return nil
	}
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[kitpb.WindowSet](topo, name, log, a.opts...)
		emits, joins := b.bind(kg)
		add = w.w.register(kg, func(c *ctx, _ *kitpb.WindowSet, win windowRes) error {
			r := &run{group: name, kc: c, ctx: c, emits: emits, joins: joins}
			if win.Removed {
				// A session a bridging record merged into another: its
				// result is withdrawn (Kafka Streams' null).
				return tn.forward(r, WindowKey(c.Key(), win.Start), (*wrapperspb.Int64Value)(nil))
			}
			return tn.forward(r, WindowKey(c.Key(), win.Start), wrapperspb.Int64(win.Count))
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
	return Table[wrapperspb.Int64Value]{n: tn, a: a}
}
