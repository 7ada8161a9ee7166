package streams

import (
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// Windowed is a grouped stream cut into windows on event time.
type Windowed[V any] struct {
	g    Grouped[V]
	spec group.WindowSpec
	at   func(v *V) time.Time
}

// WindowedBy cuts each key's records into the kit's windows on event time
// at (which also moves the partition's stream time, closing windows):
// group.Tumbling or group.Hopping with grace, and the emit strategy the spec
// says (group.EmitFinal, the default: once per window when stream time
// passes its end plus grace; group.EmitUpdates: on every record).
func (g Grouped[V]) WindowedBy(spec group.WindowSpec, at func(v *V) time.Time) Windowed[V] {
	return Windowed[V]{g: g, spec: spec, at: at}
}

// WindowKey is the key a windowed result is written under: the record's
// key and the window's start (UTC, RFC 3339), as Kafka Streams' Windowed
// key prints them.
func WindowKey(key string, start time.Time) string {
	return key + "@" + start.UTC().Format(time.RFC3339)
}

// Count counts each key's records per window in group name, whose table
// name+"-table" (value fencestream.kit.v1.WindowSet, the kit's windows:
// views read it with group.WindowsOf) and timer topic name+"-timers" the
// topology must declare. Its stream is each window's count (under
// WindowKey) when the spec's emit strategy hands it over; a record later
// than its window's grace is counted in the set's late count only.
func (w Windowed[V]) Count(name string) Table[wrapperspb.Int64Value] {
	b := w.g.s.n.b
	a := &stateful{name: name, table: name + "-table", kind: "windowed count", typ: nameOf[kitpb.WindowSet](), out: nameOf[wrapperspb.Int64Value](), in: w.g.s.n.typ, input: w.g.s.n}
	b.checkTopic[kitpb.WindowSet]("WindowedBy(...).Count", a.table)
	if _, ok := b.topo.Topic(topology.TimersTopicName(name)); !ok {
		b.fail("windowed count %s: its timer topic %s is not declared (topology.TimersTopic)", name, topology.TimersTopicName(name))
	}
	term := b.add([]*node{w.g.s.n}, a.kind+" -> table "+a.table, a.typ)
	term.term = &terminal{agg: a}
	tn := b.add(nil, "table "+a.table, a.out)
	tn.table = a
	type ctx = group.Context[kitpb.WindowSet, *kitpb.WindowSet]
	var wins *group.Windows[kitpb.WindowSet, *kitpb.WindowSet, wrapperspb.Int64Value, *wrapperspb.Int64Value]
	emits := map[*node]emitFn{}
	a.apply = func(r *run, key string, v any) error {
		c := r.ctx.(*ctx)
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		if err := wins.Add(c, st, w.at(v.(*V)), 1, nil); err != nil && !errors.Is(err, group.ErrLate) {
			return err
		}
		c.SetState(st)
		return nil
	}
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[kitpb.WindowSet](topo, name, log)
		clear(emits)
		for _, n := range b.nodes {
			if n.term != nil && n.term.agg == nil && n.groups[name] {
				out := group.Output[wrapperspb.Int64Value](kg, n.term.topic)
				emits[n] = func(c group.Emitter, key string, v any) { out.Emit(c, key, v.(*wrapperspb.Int64Value)) }
			}
		}
		wins = group.NewWindows[wrapperspb.Int64Value](kg, "dsl", w.spec, func(st *kitpb.WindowSet) *kitpb.WindowSet { return st },
			func(c *ctx, _ *kitpb.WindowSet, win group.Window[wrapperspb.Int64Value, *wrapperspb.Int64Value]) error {
				r := &run{group: name, kc: c, ctx: c, emits: emits}
				return tn.forward(r, WindowKey(c.Key(), win.Start), wrapperspb.Int64(win.Count))
			})
		for _, r := range a.input.roots() {
			if r.table != nil {
				continue // refused by assign
			}
			group.Stream(kg, r.topic, func(c *ctx, m *msg[V]) error {
				return r.push(&run{group: name, kc: c, ctx: c, emits: emits}, c.Key(), unwrap(m))
			}, group.EventTime(func(m *msg[V]) time.Time { return w.at(unwrap(m)) }))
		}
		return kg
	}
	b.aggs = append(b.aggs, a)
	return Table[wrapperspb.Int64Value]{n: tn, a: a}
}
