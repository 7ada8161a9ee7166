package streams

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// GroupedTable is a table re-grouped by a new key, ready to aggregate
// (Kafka Streams' KGroupedTable): each row counts in the group of its
// current value only.
type GroupedTable[V any] struct{ s Stream[kitpb.Change] }

// GroupBy re-groups the table by key: on each update of a row, its old
// value is sent to be subtracted from the group key it had and its new value
// to be added to the group key it has now (one record when the key is the
// same), written to topic (value fencestream.kit.v1.Change, declared by the
// topology, never generated) across bd as for Stream.SelectKey; the
// aggregation after it reads topic. A key of "" leaves the row out of every
// group (Kafka Streams' null key). The table must be an aggregation's, or
// one derived from it by Filter, MapValues or a table join; the re-key runs
// in the group that runs the table's updates.
func (t Table[V]) GroupBy(bd topology.Boundary, topic string, key func(key string, v *V) string) GroupedTable[V] {
	b := t.n.b
	b.checkTopic[kitpb.Change]("Table.GroupBy", topic)
	if bd.From != "" || bd.To != "" || bd.Processor != "" {
		b.fail("Table.GroupBy to %s: the boundary's Processor, From and To are the builder's to fill in; give only Preserved, Lost and Lag", topic)
	}
	ch := t.changes()
	if ch == nil {
		b.fail("Table.GroupBy to %s: the table has no old values to subtract (a windowed table, whose stream is its windows' results, or a foreign-key join's result)", topic)
		return GroupedTable[V]{s: b.Stream[kitpb.Change](topic)}
	}
	n := b.add([]*node{ch}, "groupBy", nameOf[kitpb.Change]())
	n.step = func(_ *run, k string, v any, next func(string, any) error) error {
		c := v.(change)
		old, _ := c.old.(*V)
		nw, _ := c.new.(*V)
		var ok, nk string
		if old != nil {
			ok = key(k, old)
		}
		if nw != nil {
			nk = key(k, nw)
		}
		if ok != "" && ok == nk {
			m, err := changeOf(old, nw)
			if err != nil {
				return err
			}
			return next(ok, m)
		}
		if ok != "" {
			m, err := changeOf(old, nil)
			if err != nil {
				return err
			}
			if err := next(ok, m); err != nil {
				return err
			}
		}
		if nk != "" {
			m, err := changeOf(nil, nw)
			if err != nil {
				return err
			}
			return next(nk, m)
		}
		return nil
	}
	Stream[kitpb.Change]{n}.sink("groupBy -> "+topic, topic, bd, true).term.regroup = true
	return GroupedTable[V]{s: b.Stream[kitpb.Change](topic)}
}

func changeOf[V any](old, nw *V) (*kitpb.Change, error) {
	var m kitpb.Change
	var err error
	if old != nil {
		m.HasOld = true
		if m.OldValue, err = proto.Marshal(any(old).(proto.Message)); err != nil {
			return nil, err
		}
	}
	if nw != nil {
		m.HasNew = true
		if m.NewValue, err = proto.Marshal(any(nw).(proto.Message)); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// values decodes a Change's old and new value (nil when absent).
func values[V any](m *kitpb.Change) (old, nw *V) {
	dec := func(has bool, b []byte) *V {
		if !has {
			return nil
		}
		v := new(V)
		if err := proto.Unmarshal(b, any(v).(proto.Message)); err != nil {
			// The DSL wrote it with V's schema: a record that does not
			// decode is not the DSL's (the kit dead-letters the panic).
			panic(fmt.Sprintf("streams: a re-grouped table's change does not decode as %s: %v", nameOf[V](), err))
		}
		return v
	}
	return dec(m.GetHasOld(), m.GetOldValue()), dec(m.GetHasNew(), m.GetNewValue())
}

// Aggregate folds each group's rows into a *A (Kafka Streams'
// KGroupedTable.aggregate): init makes a group's first accumulator, add
// folds a row's new value in and sub takes a row's old value out (each may
// change and return agg), the subtraction first. The result is the table of
// group name (name+"-table", value A, declared by the topology); opts are
// its group's, as for Grouped.Aggregate. A group whose rows all left keeps
// what sub made of it (zero, for a count).
func (g GroupedTable[V]) Aggregate[A any](name string, init func() *A, add, sub func(key string, v *V, agg *A) *A, opts ...group.Opt) Table[A] {
	return aggregate(Grouped[kitpb.Change]{s: g.s}, "aggregate of a re-grouped table", name, init, func(key string, m *kitpb.Change, agg *A) *A {
		old, nw := values[V](m)
		if old != nil {
			agg = sub(key, old, agg)
		}
		if nw != nil {
			agg = add(key, nw, agg)
		}
		return agg
	}, opts)
}

// Count counts each group's rows into group name's table (value
// google.protobuf.Int64Value): a row that moves to another group is counted
// there and no longer in the group it left.
func (g GroupedTable[V]) Count(name string, opts ...group.Opt) Table[wrapperspb.Int64Value] {
	return g.Aggregate(name, func() *wrapperspb.Int64Value { return &wrapperspb.Int64Value{} },
		func(_ string, _ *V, n *wrapperspb.Int64Value) *wrapperspb.Int64Value {
			n.Value++
			return n
		},
		func(_ string, _ *V, n *wrapperspb.Int64Value) *wrapperspb.Int64Value {
			n.Value--
			return n
		}, opts...)
}

// Reduce combines each group's rows with add, the first as it is, and takes
// a row's old value out with sub, into group name's table (value V). A sub
// that returns nil removes the group's row.
func (g GroupedTable[V]) Reduce(name string, add, sub func(agg, v *V) *V, opts ...group.Opt) Table[V] {
	return g.Aggregate(name, func() *V { return nil },
		func(_ string, v, agg *V) *V {
			if agg == nil {
				return v
			}
			return add(agg, v)
		},
		func(_ string, v, agg *V) *V {
			if agg == nil {
				return nil
			}
			return sub(agg, v)
		}, opts...)
}
