package streams

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// JoinFK joins each row of t with other's row under the foreign key fk
// reads from it (Kafka Streams' foreign-key table join, KIP-213): the
// result, under t's key, is joiner's, or nil (a tombstone) when other holds
// no row for the foreign key, when fk says "" or when t's row goes; a new
// row of t whose foreign key other does not hold yet waits for it quietly,
// as in Kafka Streams.
//
// The tables are keyed differently, so the join crosses two declared
// boundaries through two declared topics, as Kafka Streams does through
// its generated ones: each update of t's row subscribes its key under the
// foreign key to subscriptions (value fencestream.kit.v1.Subscription,
// keyed like other), across toFK; group name keeps each foreign key's
// subscribers in its table name+"-table" (fencestream.kit.v1.Subscribers)
// and answers each subscription, and other's group answers each of a
// foreign key's subscribers when other's row changes, to responses (value
// fencestream.kit.v1.Response, keyed like t), across back. The routing
// group reads the answers and joins each with t's current row, read
// locally; an answer for a foreign key the row no longer has is dropped.
// The result is computed, not stored, and carries no old values (a
// GroupBy of it is refused).
func (t Table[V]) JoinFK[W, R any](other Table[W], fk func(v *V) string, joiner func(v *V, w *W) *R, name, subscriptions, responses string, toFK, back topology.Boundary) Table[R] {
	return joinFK(t, other, fk, joiner, name, subscriptions, responses, toFK, back, false)
}

// LeftJoinFK is JoinFK keeping each row of t: joiner gets a nil *W when
// other holds no row for the foreign key, or fk says "".
func (t Table[V]) LeftJoinFK[W, R any](other Table[W], fk func(v *V) string, joiner func(v *V, w *W) *R, name, subscriptions, responses string, toFK, back topology.Boundary) Table[R] {
	return joinFK(t, other, fk, joiner, name, subscriptions, responses, toFK, back, true)
}

func joinFK[V, W, R any](t Table[V], o Table[W], fk func(*V) string, f func(*V, *W) *R, name, subs, resps string, toFK, back topology.Boundary, left bool) Table[R] {
	b := t.n.b
	label := "joinFK " + t.a.table + " with " + o.a.table
	if left {
		label = "leftJoinFK " + t.a.table + " with " + o.a.table
	}
	lc := t.changes()
	if t.n.table == nil || o.n.table == nil || lc == nil || o.a.typ != o.a.out || t.a.typ != nameOf[V]() || o.a.typ != nameOf[W]() {
		b.fail("%s: both tables must be aggregations' own (materialized) tables, not windowed or derived", label)
		return Table[R]{n: b.add(nil, label, nameOf[R]()), a: t.a}
	}
	for _, bd := range []topology.Boundary{toFK, back} {
		if bd.From != "" || bd.To != "" || bd.Processor != "" {
			b.fail("%s: the boundaries' Processor, From and To are the builder's to fill in; give only Preserved, Lost and Lag", label)
		}
	}

	// t's updates subscribe their key under the foreign key (and leave the
	// one they had), saying when to answer as Kafka Streams does: a new row
	// of an inner join only when the right row exists, a changed row always
	// (its earlier result may need retracting), a row that went with a
	// tombstone, a row that moved away never.
	sub := b.add([]*node{lc}, "subscribe under the foreign key", nameOf[kitpb.Subscription]())
	sub.step = func(_ *run, k string, v any, next func(string, any) error) error {
		c := v.(change)
		old, _ := c.old.(*V)
		nw, _ := c.new.(*V)
		var ofk, nfk string
		if old != nil {
			ofk = fk(old)
		}
		if nw != nil {
			nfk = fk(nw)
		}
		if ofk != "" && ofk != nfk {
			reply := kitpb.Reply_REPLY_NEVER
			if nfk == "" {
				reply = kitpb.Reply_REPLY_ALWAYS // nothing else will retract the result
			}
			if err := next(ofk, &kitpb.Subscription{Key: k, Unsubscribe: true, Reply: reply}); err != nil {
				return err
			}
		}
		if nfk == "" {
			return nil
		}
		reply := kitpb.Reply_REPLY_ALWAYS
		if old == nil && !left {
			reply = kitpb.Reply_REPLY_IF_FOUND
		}
		return next(nfk, &kitpb.Subscription{Key: k, Reply: reply})
	}
	Stream[kitpb.Subscription]{sub}.sink("subscribe -> "+subs, subs, toFK, true).term.regroup = true

	// Group name keeps each foreign key's subscribers and answers the one
	// that just subscribed (or left) with other's row.
	kept := b.Stream[kitpb.Subscription](subs).GroupByKey().Aggregate(name, func() *kitpb.Subscribers { return &kitpb.Subscribers{} },
		func(_ string, s *kitpb.Subscription, st *kitpb.Subscribers) *kitpb.Subscribers {
			st.Keys = slices.DeleteFunc(st.Keys, func(k string) bool { return k == s.GetKey() })
			if !s.GetUnsubscribe() {
				st.Keys = append(st.Keys, s.GetKey())
			}
			st.Answer, st.Reply = s.GetKey(), s.GetReply()
			return st
		})
	answer := b.add([]*node{kept.n}, "answer with "+o.a.table, nameOf[kitpb.Response]())
	answer.joined, answer.join = o.a.table, joinOf[W](o.a.table)
	answer.step = func(r *run, key string, v any, next func(string, any) error) error {
		st, _ := v.(*kitpb.Subscribers)
		if st.GetAnswer() == "" || st.GetReply() == kitpb.Reply_REPLY_NEVER {
			return nil
		}
		got, err := r.joins[answer](r.kc)
		if err != nil {
			return err
		}
		w, _ := got.(*W)
		if w == nil && st.GetReply() == kitpb.Reply_REPLY_IF_FOUND {
			return nil
		}
		m, err := responseOf(key, w)
		if err != nil {
			return err
		}
		return next(st.GetAnswer(), m)
	}
	Stream[kitpb.Response]{answer}.sink("answer -> "+resps, resps, back, true).term.regroup = true

	// other's updates answer every subscriber of their key.
	fan := b.add([]*node{o.n}, "answer the subscribers in "+kept.a.table, nameOf[kitpb.Response]())
	fan.joined, fan.join = kept.a.table, joinOf[kitpb.Subscribers](kept.a.table)
	fan.step = func(r *run, key string, v any, next func(string, any) error) error {
		got, err := r.joins[fan](r.kc)
		if err != nil {
			return err
		}
		st, _ := got.(*kitpb.Subscribers)
		for _, k := range st.GetKeys() {
			m, err := responseOf(key, v.(*W))
			if err != nil {
				return err
			}
			if err := next(k, m); err != nil {
				return err
			}
		}
		return nil
	}
	Stream[kitpb.Response]{fan}.sink("answer -> "+resps, resps, back, true).term.regroup = true

	// Each answer joins t's current row, in the group that reads it.
	res := b.add([]*node{b.Stream[kitpb.Response](resps).n}, label, nameOf[R]())
	res.joined, res.join = t.a.table, joinOf[V](t.a.table)
	res.step = func(r *run, k string, v any, next func(string, any) error) error {
		m := v.(*kitpb.Response)
		got, err := r.joins[res](r.kc)
		if err != nil {
			return err
		}
		l, _ := got.(*V)
		var none *R
		switch {
		case l == nil:
			return next(k, none)
		case fk(l) == "":
			if left {
				return next(k, f(l, nil))
			}
			return next(k, none)
		case fk(l) != m.GetForeignKey():
			return nil // an answer to a subscription the row has left
		}
		var w *W
		if m.GetHasValue() {
			w = new(W)
			if err := proto.Unmarshal(m.GetValue(), any(w).(proto.Message)); err != nil {
				return fmt.Errorf("streams: %s: the answer for %q does not decode as %s: %w", label, m.GetForeignKey(), nameOf[W](), err)
			}
		}
		if w == nil && !left {
			return next(k, none)
		}
		return next(k, f(l, w))
	}
	return Table[R]{n: res, a: t.a}
}

// joinOf binds a read of table for the key to the group that runs it.
func joinOf[T any](table string) func(g group.AnyGroup) func(group.Reader) (any, error) {
	return func(g group.AnyGroup) func(group.Reader) (any, error) {
		j := group.Join[msg[T]](g, table)
		return func(c group.Reader) (any, error) {
			m, err := j.Get(c)
			return unwrap(m), err
		}
	}
}

func responseOf[W any](fk string, w *W) (*kitpb.Response, error) {
	m := &kitpb.Response{ForeignKey: fk}
	if w != nil {
		v, err := proto.Marshal(any(w).(proto.Message))
		if err != nil {
			return nil, err
		}
		m.Value, m.HasValue = v, true
	}
	return m, nil
}
