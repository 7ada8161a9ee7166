package streams

import (
	"google.golang.org/protobuf/proto"
)

// change is one update of a table as its joins and GroupBy read it: the
// row's value before and after, each a *V of the table's type (a typed nil
// when absent, or an untyped nil for an aggregation's first value).
type change struct{ old, new any }

// changes is the node whose records are t's changes, or nil when t has
// none (a windowed table, whose stream is its windows' results, or a
// Process's, whose handler keeps no old value). An
// aggregation's changes cost a copy of its value before each update, once
// something reads them.
func (t Table[V]) changes() *node {
	if t.ch != nil {
		return t.ch
	}
	if t.n.table == nil || t.a.typ != t.a.out || t.a.kind == processKind {
		return nil
	}
	if t.a.changes == nil {
		tc := t.n.b.add([]*node{t.n}, "old and new values", t.a.typ)
		tc.step = func(r *run, key string, v any, next func(string, any) error) error {
			return next(key, change{old: r.old, new: v})
		}
		t.a.changes = tc
	}
	return t.a.changes
}

// keepOld keeps, on r, a copy of an aggregation's value before the adder
// changes it in place, when its changes are read in r's group.
func keepOld[A any](a *stateful, r *run, cur *A) {
	if a.changes == nil || !a.changes.groups[r.group] || cur == nil {
		return
	}
	r.old = proto.Clone(any(cur).(proto.Message))
}

// deriveChanges is the changes of the table f derives from the table whose
// changes ch carries (nil when ch is): f of the old and of the new value; an
// update that leaves both absent is not passed on.
func deriveChanges[V, W any](ch *node, label string, f func(key string, v *V) *W) *node {
	if ch == nil {
		return nil
	}
	n := ch.b.add([]*node{ch}, label+" (old and new values)", nameOf[W]())
	n.step = func(_ *run, key string, v any, next func(string, any) error) error {
		c := v.(change)
		old, _ := c.old.(*V)
		nw, _ := c.new.(*V)
		o, w := f(key, old), f(key, nw)
		if o == nil && w == nil {
			return nil
		}
		return next(key, change{old: o, new: w})
	}
	return n
}

// Join is the table of joiner's results for each key both t and other hold
// (Kafka Streams' KTable-KTable inner join). Both must be aggregations' own
// (materialized) tables, co-partitioned: an update of either reads the other
// table's value for the key locally (the kit's Join, in the updating
// table's group) and passes on the joined row; a row either side removes is
// removed (its stream carries nil, a tombstone once written). The result
// is not stored: it is computed on each update of either side, in that
// side's group, as Filter and MapValues are.
func (t Table[V]) Join[W, R any](other Table[W], joiner func(v *V, w *W) *R) Table[R] {
	return tableJoin(t, other, joiner, "join", func(l, r bool) bool { return l && r })
}

// LeftJoin is Join keeping each key t holds: joiner gets a nil *W when
// other does not hold it.
func (t Table[V]) LeftJoin[W, R any](other Table[W], joiner func(v *V, w *W) *R) Table[R] {
	return tableJoin(t, other, joiner, "leftJoin", func(l, _ bool) bool { return l })
}

// OuterJoin is Join keeping each key either table holds: joiner gets a nil
// *V or *W for the side that does not hold it.
func (t Table[V]) OuterJoin[W, R any](other Table[W], joiner func(v *V, w *W) *R) Table[R] {
	return tableJoin(t, other, joiner, "outerJoin", func(l, r bool) bool { return l || r })
}

// tableJoin joins t and o: each side's updates read the other side's table
// and say, by holds (whether the left and the right row exist), whether a
// joined row exists before and after the update.
func tableJoin[V, W, R any](t Table[V], o Table[W], f func(*V, *W) *R, kind string, holds func(left, right bool) bool) Table[R] {
	b := t.n.b
	label := kind + " " + t.a.table + " with " + o.a.table
	lc, rc := t.changes(), o.changes()
	switch {
	case t.n.table == nil || o.n.table == nil || lc == nil || rc == nil || t.a.typ != nameOf[V]() || o.a.typ != nameOf[W]():
		b.fail("%s: both tables must be aggregations' own (materialized) tables, not windowed or derived (join the aggregation's table, then Filter or MapValues the result)", label)
		return Table[R]{n: b.add(nil, label, nameOf[R]()), a: t.a}
	case t.a == o.a:
		b.fail("%s: a table joined with itself reads its own group table: MapValues it instead", label)
		return Table[R]{n: b.add(nil, label, nameOf[R]()), a: t.a}
	}
	left := joinSide(lc, o.a, func(v *V, w *W) *R { return f(v, w) }, func(v, w bool) bool { return holds(v, w) })
	right := joinSide(rc, t.a, func(w *W, v *V) *R { return f(v, w) }, func(w, v bool) bool { return holds(v, w) })
	jn := b.add([]*node{left, right}, label, nameOf[R]())
	out := b.add([]*node{jn}, "new values", nameOf[R]())
	out.step = func(_ *run, key string, v any, next func(string, any) error) error {
		nw, _ := v.(change).new.(*R)
		return next(key, nw)
	}
	return Table[R]{n: out, a: t.a, ch: jn}
}

// joinSide runs on one side's changes ch, in that side's group, reading the
// other side's table (other) for the key.
func joinSide[S, O, R any](ch *node, other *stateful, join func(s *S, o *O) *R, holds func(s, o bool) bool) *node {
	n := ch.b.add([]*node{ch}, "read "+other.table+" for the key", nameOf[R]())
	n.joined, n.join = other.table, joinOf[O](other.table)
	n.step = func(r *run, key string, v any, next func(string, any) error) error {
		c := v.(change)
		old, _ := c.old.(*S)
		nw, _ := c.new.(*S)
		got, err := r.joins[n](r.kc)
		if err != nil {
			return err
		}
		o, _ := got.(*O)
		before, after := holds(old != nil, o != nil), holds(nw != nil, o != nil)
		if !before && !after {
			return nil
		}
		var res change
		res.old, res.new = (*R)(nil), (*R)(nil)
		if before {
			res.old = join(old, o)
		}
		if after {
			res.new = join(nw, o)
		}
		return next(key, res)
	}
	return n
}
