package streams

import (
	"github.com/fencestream/fencestream/processors/group"
)

// Join enriches each record with table t's value for the record's key
// (Kafka Streams' KStream-KTable inner join): f makes the result; a record
// whose key t does not hold is dropped. t must be an aggregation's
// materialized table, co-partitioned with the stream's source (the kit's
// Join: the value is read locally, no network hop), in whichever group
// runs the stream: the routing group, or an aggregation grouping the result.
func (s Stream[V]) Join[T, R any](t Table[T], f func(v *V, t *T) *R) Stream[R] {
	return join(s, t, f, false)
}

// LeftJoin is Join keeping every record: f gets a nil *T when t does not
// hold the key.
func (s Stream[V]) LeftJoin[T, R any](t Table[T], f func(v *V, t *T) *R) Stream[R] {
	return join(s, t, f, true)
}

func join[V, T, R any](s Stream[V], t Table[T], f func(*V, *T) *R, left bool) Stream[R] {
	b := s.n.b
	label := "join " + t.a.table
	if left {
		label = "leftJoin " + t.a.table
	}
	if t.n.table == nil || t.a.typ != nameOf[T]() {
		b.fail("%s: the table must be an aggregation's own (materialized) table of %s", label, nameOf[T]())
	}
	var self *node // the join's node, set below: its binding is per group instance
	out := s.then[R](label, func(r *run, key string, v *V, next func(string, *R) error) error {
		got, err := r.joins[self](r.kc)
		if err != nil {
			return err
		}
		tv, _ := got.(*T)
		if tv == nil && !left {
			return nil
		}
		return next(key, f(v, tv))
	})
	self = out.n
	self.joined = t.a.table
	self.join = func(g group.AnyGroup) func(group.Reader) (any, error) {
		j := group.Join[msg[T]](g, t.a.table)
		return func(c group.Reader) (any, error) {
			m, err := j.Get(c)
			return unwrap(m), err
		}
	}
	return out
}
