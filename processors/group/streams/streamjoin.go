package streams

import (
	"errors"
	"log/slog"
	"reflect"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

type (
	joinCtx   = group.Context[kitpb.JoinBuffer, *kitpb.JoinBuffer]
	joinGroup = group.Group[kitpb.JoinBuffer, *kitpb.JoinBuffer]
)

// JoinWindow is how far apart in event time two records of a windowed
// stream-stream join may be, and how late one may arrive: Kafka Streams'
// JoinWindows. The kind of join is the method's (JoinWindowed,
// LeftJoinWindowed, OuterJoinWindowed).
type JoinWindow struct{ spec windows.JoinSpec }

// JoinWindows joins records at most difference apart, either way, and admits
// records up to grace out of order (Kafka Streams'
// JoinWindows.ofTimeDifferenceAndGrace). A left or outer join hands over an
// unmatched record once its window plus grace has closed, never before.
func JoinWindows(difference, grace time.Duration) JoinWindow {
	return JoinWindow{spec: windows.JoinWindows(difference, grace, windows.InnerJoin)}
}

// Before is w with a record of the stream joining the other stream's records
// down to d earlier (Kafka Streams' JoinWindows.before; d may be negative if
// After covers it).
func (w JoinWindow) Before(d time.Duration) JoinWindow { w.spec = w.spec.WithBefore(d); return w }

// After is w with a record of the stream joining the other stream's records
// up to d later (Kafka Streams' JoinWindows.after).
func (w JoinWindow) After(d time.Duration) JoinWindow { w.spec = w.spec.WithAfter(d); return w }

// JoinWindowed joins the stream with other by key and event time (Kafka
// Streams' KStream-KStream join): each record of s at t pairs with every
// record of other at [t-Before, t+After] under its key, in either order of
// arrival, and f makes the result of each pair. The join is group name of its
// own, on the kit's windows.StreamJoin: its buffers are the key's state in
// table name+"-table" (value fencestream.kit.v1.JoinBuffer) and it closes
// windows by its timer topic name+"-timers"; the topology must declare both.
// Both streams must be read from sources with EventTime (the join goes by
// event time), keyed alike (co-partitioned) and not re-keyed on the way; the
// stateless operators before the join run in its group. A record later than
// its window plus grace is counted late and held nowhere; a record with a nil
// value is dropped, as in Kafka Streams. opts are the options of the group's
// group.New, as for Grouped.Aggregate.
func (s Stream[V]) JoinWindowed[W, R any](other Stream[W], name string, w JoinWindow, f func(v *V, o *W) *R, opts ...group.Opt) Stream[R] {
	return joinWindowed(s, other, name, w, windows.InnerJoin, f, opts)
}

// LeftJoinWindowed is JoinWindowed keeping every record of s: one that
// paired with nothing is handed to f with a nil *W once its window plus
// grace has closed (Kafka Streams 3.1 and later: no eager nil results).
func (s Stream[V]) LeftJoinWindowed[W, R any](other Stream[W], name string, w JoinWindow, f func(v *V, o *W) *R, opts ...group.Opt) Stream[R] {
	return joinWindowed(s, other, name, w, windows.LeftJoin, f, opts)
}

// OuterJoinWindowed is JoinWindowed keeping every record of both streams:
// one that paired with nothing is handed to f with nil for the other side
// once its window plus grace has closed.
func (s Stream[V]) OuterJoinWindowed[W, R any](other Stream[W], name string, w JoinWindow, f func(v *V, o *W) *R, opts ...group.Opt) Stream[R] {
	return joinWindowed(s, other, name, w, windows.OuterJoin, f, opts)
}

func joinWindowed[V, W, R any](s Stream[V], o Stream[W], name string, w JoinWindow, kind windows.JoinKind, f func(*V, *W) *R, opts []group.Opt) Stream[R] {
	b := s.n.b
	label := map[windows.JoinKind]string{windows.InnerJoin: "windowed join", windows.LeftJoin: "windowed left join", windows.OuterJoin: "windowed outer join"}[kind]
	spec := w.spec
	spec.Kind = kind
	if err := checkMessage[R](); err != nil {
		b.errs = append(b.errs, err)
	}
	const buffer = "fencestream.kit.v1.JoinBuffer"
	// input nil: assign's checks of an aggregation's one input do not apply;
	// the sides are checked here.
	a := &stateful{name: name, table: name + "-table", kind: label, typ: buffer, out: nameOf[R](), opts: opts}
	if tp, ok := b.topo.Topic(a.table); !ok {
		b.fail("%s %s: its table topic %s is not declared (value %s, compacted): the join's buffers live there", label, name, a.table, buffer)
	} else if tp.Value != buffer {
		b.fail("%s %s: its table %s is declared with value %s, want %s", label, name, a.table, tp.Value, buffer)
	}
	if _, ok := b.topo.Topic(topology.TimersTopicName(name)); !ok {
		b.fail("%s %s: its timer topic %s is not declared (topology.TimersTopic): unmatched records and expired buffers go by it", label, name, topology.TimersTopicName(name))
	}
	b.checkJoinSides(label, name, s.n, o.n)

	// Each side ends in a terminal of the join's group; the right one's
	// stateful is a handle on the same group (assign marks by name), not a
	// second aggregation.
	left := b.add([]*node{s.n}, label+" (left) -> table "+a.table, buffer)
	left.term = &terminal{agg: a}
	right := &stateful{name: name, table: a.table, kind: label, typ: buffer, out: a.out}
	rn := b.add([]*node{o.n}, label+" (right) -> table "+a.table, buffer)
	rn.term = &terminal{agg: right}
	tn := b.add(nil, label+" "+name, a.out)
	tn.table = a

	var j *windows.StreamJoin[kitpb.JoinBuffer, *kitpb.JoinBuffer, msg[V], *msg[V], msg[W], *msg[W]]
	add := func(r *run, isLeft bool, v any) error {
		c := r.ctx.(*joinCtx)
		st := c.State()
		if st == nil {
			st = &kitpb.JoinBuffer{}
		}
		var err error
		if isLeft {
			if v.(*V) == nil {
				return nil
			}
			err = j.AddLeft(c, st, c.EventTime(), wrap(v.(*V)))
		} else {
			if v.(*W) == nil {
				return nil
			}
			err = j.AddRight(c, st, c.EventTime(), wrap(v.(*W)))
		}
		c.SetState(st)
		return withoutLate(err)
	}
	a.apply = func(r *run, _ string, v any) error { return add(r, true, v) }
	right.apply = func(r *run, _ string, v any) error { return add(r, false, v) }
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[kitpb.JoinBuffer](topo, name, log, a.opts...)
		emits, joins := b.bind(kg)
		j = windows.NewStreamJoin[msg[V], *msg[V], msg[W], *msg[W]](kg, "dsl", spec,
			func(jb *kitpb.JoinBuffer) *kitpb.JoinBuffer { return jb },
			func(c *joinCtx, _ *kitpb.JoinBuffer, l *msg[V], r *msg[W]) error {
				return tn.forward(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, c.Key(), f(unwrap(l), unwrap(r)))
			})
		// A source both sides read (a self-join) is read once: its record
		// reaches the left terminal, then the right.
		seen := map[*node]bool{}
		for _, r := range append(s.n.roots(), o.n.roots()...) {
			if seen[r] || r.joinInput == nil {
				continue // refused by checkJoinSides when not a source
			}
			seen[r] = true
			r.joinInput(kg, func(c kitContext, v any) error {
				return r.push(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, c.Key(), v)
			})
		}
		return kg
	}
	b.aggs = append(b.aggs, a)
	return Stream[R]{tn}
}

// checkJoinSides records why the two sides of a windowed join cannot meet in
// one group: each must be read from sources with event time, not re-keyed,
// and every source keyed alike (co-partitioned: a key's records of both
// sides reach the same partition of the join's group).
func (b *Builder) checkJoinSides(label, name string, sides ...*node) {
	key, first := "", ""
	for i, n := range sides {
		side := [...]string{"left", "right"}[i]
		if n.rekeyed {
			b.fail("%s %s: its %s side comes after Map or FlatMap, which may change the key: re-key with SelectKey(boundary, topic, fn) and join the stream it returns", label, name, side)
		}
		for _, r := range n.roots() {
			if r.table != nil {
				b.fail("%s %s: its %s side is table %s's stream: write it To a topic and join a stream read from that topic", label, name, side, r.table.table)
				continue
			}
			if at := reflect.ValueOf(r.eventTime); !at.IsValid() || at.IsNil() { // a func(*V) time.Time, maybe nil
				b.fail("%s %s: source %s (%s side) has no EventTime: a windowed join goes by event time (Builder.Stream(%q, streams.EventTime(...)))", label, name, r.topic, side, r.topic)
			}
			tp, ok := b.topo.Topic(r.topic)
			switch {
			case !ok:
			case first == "":
				key, first = tp.Key, r.topic
			case tp.Key != key:
				b.fail("%s %s: %s is keyed by %s and %s by %s: both sides must be keyed alike (co-partitioned); re-key one with SelectKey first", label, name, first, key, r.topic, tp.Key)
			}
		}
	}
}

// withoutLate is err without the join's ErrLate: a late record is counted
// (the kit's late metric and JoinBuffer.late) and held nowhere, which is
// not a failure of the record; any other error stays.
func withoutLate(err error) error {
	if !errors.Is(err, windows.ErrLate) {
		return err
	}
	var rest []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !errors.Is(e, windows.ErrLate) {
				rest = append(rest, e)
			}
		}
	}
	return errors.Join(rest...)
}
