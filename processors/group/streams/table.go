package streams

import (
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

type emptyState = emptypb.Empty

// Grouped is a stream grouped by key, ready to aggregate.
type Grouped[V any] struct{ s Stream[V] }

// Table is the latest *V per key: an aggregation's group table (a kit group
// table views can read), or a table derived from one by Filter, MapValues
// or a table join (computed on each update, not stored).
type Table[V any] struct {
	n  *node
	a  *stateful
	ch *node // its changes (old and new value), for a derived table; see changes
}

// stateful is one aggregation: a kit group named name whose table is
// name+"-table".
type stateful struct {
	name, table, kind string
	typ, in           string // the table's value and the grouped values
	out               string // the value type of the table's stream
	input             *node
	opts              []group.Opt // the options of its group.New
	apply             func(r *run, key string, v any) error
	instantiate       func(topo *topology.Topology, log *slog.Logger) Group
	changes           *node // the table's old and new values, once read (Table.changes)
}

// Aggregate folds each key's values into a *A: init makes a key's first
// accumulator, add folds one value in (it may change and return agg). The
// result is the table of group name, whose table topic name+"-table" the
// topology must declare with value A. opts are the options of the group's
// group.New (what the group is: StateTTL, CacheStates, …; default none); one
// of Processor's or Run's is refused by Build, as the kit refuses it.
func (g Grouped[V]) Aggregate[A any](name string, init func() *A, add func(key string, v *V, agg *A) *A, opts ...group.Opt) Table[A] {
	return aggregate(g, "aggregate", name, init, add, opts)
}

// Count counts each key's records into group name's table (value
// google.protobuf.Int64Value). opts are the group's, as for Aggregate.
func (g Grouped[V]) Count(name string, opts ...group.Opt) Table[wrapperspb.Int64Value] {
	return aggregate(g, "count", name, func() *wrapperspb.Int64Value { return &wrapperspb.Int64Value{} },
		func(_ string, _ *V, n *wrapperspb.Int64Value) *wrapperspb.Int64Value {
			n.Value++
			return n
		}, opts)
}

// Reduce combines each key's values with f, the first value as it is, into
// group name's table (value V). opts are the group's, as for Aggregate.
func (g Grouped[V]) Reduce(name string, f func(agg, v *V) *V, opts ...group.Opt) Table[V] {
	return aggregate(g, "reduce", name, func() *V { return nil }, func(_ string, v, agg *V) *V {
		if agg == nil {
			return v
		}
		return f(agg, v)
	}, opts)
}

func aggregate[V, A any](g Grouped[V], kind, name string, init func() *A, add func(string, *V, *A) *A, opts []group.Opt) Table[A] {
	b := g.s.n.b
	a := &stateful{name: name, table: name + "-table", kind: kind, typ: nameOf[A](), out: nameOf[A](), in: g.s.n.typ, input: g.s.n, opts: opts}
	b.checkTopic[A](kind, a.table)
	term := b.add([]*node{g.s.n}, kind+" -> table "+a.table, a.typ)
	term.term = &terminal{agg: a}
	tn := b.add(nil, "table "+a.table, a.typ)
	tn.table = a
	a.apply = func(r *run, key string, v any) error {
		c := r.ctx.(*group.Context[msg[A], *msg[A]])
		cur := unwrap(c.State())
		keepOld(a, r, cur)
		if cur == nil {
			cur = init()
		}
		next := add(key, v.(*V), cur)
		c.SetState(wrap(next))
		return tn.forward(r, key, next)
	}
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[msg[A]](topo, name, log, a.opts...)
		emits, joins := b.bind(kg)
		for _, r := range a.input.roots() {
			if r.table != nil {
				continue // refused by assign
			}
			at, _ := r.eventTime.(func(*V) time.Time) // the source holds V (assign)
			group.Stream(kg, r.topic, func(c *group.Context[msg[A], *msg[A]], m *msg[V]) error {
				return r.push(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, c.Key(), unwrap(m))
			}, streamOpts(at)...)
		}
		return kg
	}
	b.aggs = append(b.aggs, a)
	return Table[A]{n: tn, a: a}
}

// Name is the table's topic (its group's table), for views and routes.
func (t Table[V]) Name() string { return t.a.table }

// Stored is the full name of the message the table's topic holds per key:
// V for an aggregation's own table, fencestream.kit.v1.WindowSet for a
// windowed Count and the app's A for a windowed Aggregate (whose streams
// are V), and "" for a table derived by Filter or MapValues, which is
// computed on each update and stored nowhere.
func (t Table[V]) Stored() string {
	if t.n.table == nil {
		return ""
	}
	return t.a.typ
}

// ToStream is the table's stream of updates: each new value of a key as it
// is stored (Kafka Streams' KTable.toStream without its cache).
func (t Table[V]) ToStream() Stream[V] { return Stream[V]{t.n} }

// Filter is the table of the values keep accepts; a value it refuses is
// not passed on by its stream (a removed row, nil, is). A join or GroupBy
// of it sees a row that stops passing as removed.
func (t Table[V]) Filter(keep func(key string, v *V) bool) Table[V] {
	pass := func(k string, v *V) *V {
		if v == nil || !keep(k, v) {
			return nil
		}
		return v
	}
	return Table[V]{n: t.ToStream().Filter(func(k string, v *V) bool { return v == nil || keep(k, v) }).n, a: t.a,
		ch: deriveChanges(t.changes(), "filter", pass)}
}

// MapValues is the table of f's values (a removed row, nil, stays nil). A
// join or GroupBy of it calls f on a row's old value too, so f must not
// depend on what it was called with before.
func (t Table[V]) MapValues[W any](f func(v *V) *W) Table[W] {
	g := func(_ string, v *V) *W {
		if v == nil {
			return nil
		}
		return f(v)
	}
	return Table[W]{n: t.ToStream().MapValues(func(v *V) *W { return g("", v) }).n, a: t.a,
		ch: deriveChanges(t.changes(), "mapValues", g)}
}
