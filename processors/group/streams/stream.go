package streams

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

// Stream is a record stream whose values are *V (V a generated protobuf
// message) under the kit's string keys.
type Stream[V any] struct{ n *node }

// KeyValue is one record a FlatMap makes.
type KeyValue[V any] struct {
	Key   string
	Value *V
}

// Pair is KeyValue{key, v}.
func Pair[V any](key string, v *V) KeyValue[V] { return KeyValue[V]{Key: key, Value: v} }

// SourceOpt configures a source (Builder.Stream).
type SourceOpt[V any] func(*sourceConfig[V])

type sourceConfig[V any] struct{ at func(*V) time.Time }

// EventTime says when each record happened: every group reading the source
// moves its partitions' stream time by it (the kit's group.EventTime), which
// timers and windows go by. The default is none: stream time stays still.
func EventTime[V any](at func(v *V) time.Time) SourceOpt[V] {
	return func(c *sourceConfig[V]) { c.at = at }
}

// streamOpts are the kit's options for reading a source of *V.
func streamOpts[V any](at func(*V) time.Time) []group.StreamOpt[msg[V], *msg[V]] {
	if at == nil {
		return nil
	}
	return []group.StreamOpt[msg[V], *msg[V]]{group.EventTime(func(m *msg[V]) time.Time { return at(unwrap(m)) })}
}

// Stream reads topic, which the topology must declare with V as its value.
// A topic read twice is one source (options given the first time).
func (b *Builder) Stream[V any](topic string, opts ...SourceOpt[V]) Stream[V] {
	if r, ok := b.roots[topic]; ok {
		if r.typ != nameOf[V]() {
			b.fail("topic %s is read as %s and as %s", topic, r.typ, nameOf[V]())
		}
		return Stream[V]{r}
	}
	var cfg sourceConfig[V]
	for _, o := range opts {
		o(&cfg)
	}
	b.checkTopic[V]("Stream", topic)
	n := b.add(nil, "source "+topic, nameOf[V]())
	n.topic = topic
	n.eventTime = cfg.at
	n.input = func(g *routingGroup, h func(c kitContext, v any) error, _ *slog.Logger) {
		group.Stream(g, topic, func(c *group.Context[emptyState, *emptyState], m *msg[V]) error { return h(c, unwrap(m)) }, streamOpts(cfg.at)...)
	}
	n.joinInput = func(g *joinGroup, h func(c kitContext, v any) error) {
		group.Stream(g, topic, func(c *joinCtx, m *msg[V]) error { return h(c, unwrap(m)) }, streamOpts(cfg.at)...)
	}
	b.roots[topic] = n
	return Stream[V]{n}
}

// checkTopic records why topic cannot carry V.
func (b *Builder) checkTopic[V any](op, topic string) {
	if err := checkMessage[V](); err != nil {
		b.errs = append(b.errs, err)
		return
	}
	tp, ok := b.topo.Topic(topic)
	switch {
	case !ok:
		b.fail("%s(%q): the topology declares no such topic", op, topic)
	case tp.Value != nameOf[V]():
		b.fail("%s(%q): the topic holds %s, not %s", op, topic, tp.Value, nameOf[V]())
	}
}

func (s Stream[V]) then[W any](label string, step func(r *run, key string, v *V, next func(string, *W) error) error) Stream[W] {
	if err := checkMessage[W](); err != nil {
		s.n.b.errs = append(s.n.b.errs, err)
	}
	n := s.n.b.add([]*node{s.n}, label, nameOf[W]())
	n.step = func(r *run, key string, v any, next func(string, any) error) error {
		return step(r, key, v.(*V), func(k string, w *W) error { return next(k, w) })
	}
	return Stream[W]{n}
}

// FilterOpt changes what a filter does with a record it rejects.
type FilterOpt func(*filterConfig)

type filterConfig struct{ reason string }

// DeadLetter makes a filter send each record it rejects to the dead-letter
// topic with reason (the kit's dead-letter path: original key and value, a
// reason header, the metric) instead of dropping it (the default).
func DeadLetter(reason string) FilterOpt { return func(c *filterConfig) { c.reason = reason } }

// Filter keeps the records keep accepts.
func (s Stream[V]) Filter(keep func(key string, v *V) bool, opts ...FilterOpt) Stream[V] {
	return s.filter("filter", keep, true, opts)
}

// FilterNot keeps the records drop refuses.
func (s Stream[V]) FilterNot(drop func(key string, v *V) bool, opts ...FilterOpt) Stream[V] {
	return s.filter("filterNot", drop, false, opts)
}

func (s Stream[V]) filter(label string, pred func(string, *V) bool, want bool, opts []FilterOpt) Stream[V] {
	var cfg filterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.reason != "" {
		label += " (dead-letters " + cfg.reason + ")"
	}
	return Stream[V](s.then[V](label, func(r *run, key string, v *V, next func(string, *V) error) error {
		if pred(key, v) == want {
			return next(key, v)
		}
		if cfg.reason != "" {
			r.kc.DeadLetter(cfg.reason, fmt.Errorf("rejected by %s", label))
		}
		return nil
	}))
}

// Map makes one record of each, under a key it may change (so a
// GroupByKey after it is refused: re-key with GroupBy).
func (s Stream[V]) Map[W any](f func(key string, v *V) (string, *W)) Stream[W] {
	out := s.then[W]("map", func(_ *run, key string, v *V, next func(string, *W) error) error {
		k, w := f(key, v)
		return next(k, w)
	})
	out.n.rekeyed = true
	return out
}

// MapValues makes one value of each, under the same key.
func (s Stream[V]) MapValues[W any](f func(v *V) *W) Stream[W] {
	return s.then[W]("mapValues", func(_ *run, key string, v *V, next func(string, *W) error) error {
		return next(key, f(v))
	})
}

// FlatMap makes any number of records of each, under keys it may change.
func (s Stream[V]) FlatMap[W any](f func(key string, v *V) []KeyValue[W]) Stream[W] {
	out := s.then[W]("flatMap", func(_ *run, key string, v *V, next func(string, *W) error) error {
		for _, kv := range f(key, v) {
			if err := next(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		return nil
	})
	out.n.rekeyed = true
	return out
}

// FlatMapValues makes any number of values of each, under the same key.
func (s Stream[V]) FlatMapValues[W any](f func(v *V) []*W) Stream[W] {
	return s.then[W]("flatMapValues", func(_ *run, key string, v *V, next func(string, *W) error) error {
		for _, w := range f(v) {
			if err := next(key, w); err != nil {
				return err
			}
		}
		return nil
	})
}

// Peek calls f for each record and passes it on unchanged.
func (s Stream[V]) Peek(f func(key string, v *V)) Stream[V] {
	return s.then[V]("peek", func(_ *run, key string, v *V, next func(string, *V) error) error {
		f(key, v)
		return next(key, v)
	})
}

// Split sends each record to the first branch whose predicate accepts it;
// the last stream returned gets the records no predicate accepts (Kafka
// Streams' split().branch(...).defaultBranch()).
func (s Stream[V]) Split(preds ...func(key string, v *V) bool) []Stream[V] {
	out := make([]Stream[V], len(preds)+1)
	for i := range out {
		out[i] = s.then[V](fmt.Sprintf("branch %d", i), func(_ *run, key string, v *V, next func(string, *V) error) error {
			for j, p := range preds {
				if p(key, v) {
					if j == i {
						return next(key, v)
					}
					return nil
				}
			}
			if i == len(preds) {
				return next(key, v)
			}
			return nil
		})
	}
	return out
}

// Merge is one stream of the records of s and others.
func (s Stream[V]) Merge(others ...Stream[V]) Stream[V] {
	parents := []*node{s.n}
	for _, o := range others {
		parents = append(parents, o.n)
	}
	n := s.n.b.add(parents, "merge", s.n.typ)
	return Stream[V]{n}
}

// To writes every record to topic, which the topology must declare with V
// as its value and with the key of the stream's source: a write to a topic
// of another key is a re-key (SelectKey).
func (s Stream[V]) To(topic string) {
	b := s.n.b
	b.checkTopic[V]("To", topic)
	if to, ok := b.topo.Topic(topic); ok {
		for _, r := range s.n.roots() {
			if from, ok := b.topo.Topic(r.topic); ok && r.table == nil && from.Key != to.Key {
				b.fail("To(%q) from %s: %s is keyed by %s and %s by %s, so this is a re-key; use SelectKey(boundary, %q, fn)", topic, r.topic, topic, to.Key, r.topic, from.Key, topic)
			}
		}
	}
	s.sink("to "+topic, topic, topology.Boundary{}, false)
}

func (s Stream[V]) sink(label, topic string, bd topology.Boundary, rekey bool) *node {
	n := s.n.b.add([]*node{s.n}, label, s.n.typ)
	n.term = &terminal{topic: topic, boundary: bd, rekey: rekey, output: func(g group.AnyGroup) emitFn {
		out := group.Output[msg[V]](g, topic)
		return func(c group.Emitter, key string, v any) { out.Emit(c, key, wrap(v.(*V))) }
	}}
	return n
}

// SelectKey re-keys the stream by key: each record is written to topic
// under its new key, crossing bd (the boundary's Preserved, Lost and Lag;
// the builder fills in its processor and topics, or takes the topology's
// declaration of it when bd is zero), and the returned stream reads topic
// with the stream's event time.
// A re-key with no boundary is refused when the app is built, naming both
// topics; topic is never generated.
func (s Stream[V]) SelectKey(bd topology.Boundary, topic string, key func(key string, v *V) string) Stream[V] {
	b := s.n.b
	b.checkTopic[V]("SelectKey", topic)
	rekeyed := s.then[V]("selectKey", func(_ *run, k string, v *V, next func(string, *V) error) error {
		return next(key(k, v), v)
	})
	if bd.From != "" || bd.To != "" || bd.Processor != "" {
		b.fail("SelectKey to %s: the boundary's Processor, From and To are the builder's to fill in; give only Preserved, Lost and Lag", topic)
	}
	rekeyed.sink("selectKey -> "+topic, topic, bd, true)
	return b.Stream[V](topic, s.eventTime()...) // the re-keyed records keep their event time
}

// GroupByKey groups the stream by its key for an aggregation, in a group
// that reads the stream's source itself (no re-key, no topic written).
func (s Stream[V]) GroupByKey() Grouped[V] { return Grouped[V]{s: s} }

// GroupBy re-keys the stream by key through topic across bd (SelectKey)
// and groups the result.
func (s Stream[V]) GroupBy(bd topology.Boundary, topic string, key func(key string, v *V) string) Grouped[V] {
	return s.SelectKey(bd, topic, key).GroupByKey()
}
