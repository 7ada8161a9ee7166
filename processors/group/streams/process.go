package streams

import (
	"errors"
	"log/slog"
	"time"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

// Processing is what a Process's setup is given: the kit group the process
// runs in, to register what its handler uses (group.OnTimer, the kit's
// windows, a versioned table, …), and Forward, which hands a record to the
// operators after the Process from any of its handlers.
type Processing[S any, PS codecs.Message[S], W any] struct {
	g       *group.Group[S, PS]
	forward func(c *group.Context[S, PS], key string, w *W) error
}

// Group is the process's kit group (named by the Process).
func (p *Processing[S, PS, W]) Group() *group.Group[S, PS] { return p.g }

// Forward hands w, under key, to the operators after the Process, in its
// group: from the record handler, a timer handler or a window's emit
// (Kafka Streams' ProcessorContext.forward). Its error is theirs (a join's
// read): return it from the handler.
func (p *Processing[S, PS, W]) Forward(c *group.Context[S, PS], key string, w *W) error {
	return p.forward(c, key, w)
}

// processCall is a record's trip into a Process's handler (run.ctx in the
// process's group).
type processCall[S any, PS codecs.Message[S], V any] struct {
	c      *group.Context[S, PS]
	handle func(c *group.Context[S, PS], v *V) error
}

// Process hands each record to a kit handler with state, timers and windows
// (Kafka Streams' KStream.process): the way out for what the other
// operators do not say. It runs in a group of its own, named name, whose
// table name+"-table" holds S itself, so views read it as any kit table;
// the topology must declare it, and the timer topic name+"-timers" if the
// group sets timers (its own or its windows'). setup is called once per
// group built: it registers what the handler needs on p.Group() and returns
// the handler, which reads and sets c's state as any kit handler does. An
// error the handler returns dead-letters the record (reason invalid), as
// the kit does (a timer handler's is logged and counted, and the timer
// consumed). The result is the stream of what p.Forward hands on;
// operators after it run in the process's group, as after an aggregation.
// As for GroupByKey, the group reads the stream's source itself: the
// source must hold V, and no Map or FlatMap may change the key on the way.
// opts are the options of the group's group.New (StateTTL, …).
func (s Stream[V]) Process[S any, PS codecs.Message[S], W any](name string, setup func(p *Processing[S, PS, W]) func(c *group.Context[S, PS], v *V) error, opts ...group.Opt) Stream[W] {
	b := s.n.b
	a := &stateful{name: name, table: name + "-table", kind: processKind, typ: nameOf[S](), out: nameOf[W](), in: s.n.typ, input: s.n, opts: opts}
	b.checkTopic[S]("Process", a.table)
	if err := checkMessage[W](); err != nil {
		b.errs = append(b.errs, err)
	}
	term := b.add([]*node{s.n}, "process "+name+" -> table "+a.table, a.typ)
	term.term = &terminal{agg: a}
	out := b.add(nil, "process "+name, a.out)
	out.table = a
	a.apply = func(r *run, _ string, v any) error {
		pc := r.ctx.(processCall[S, PS, V])
		return pc.handle(pc.c, v.(*V))
	}
	a.instantiate = func(topo *topology.Topology, log *slog.Logger) Group {
		kg := group.New[S, PS](topo, name, log, a.opts...)
		emits, joins := b.bind(kg)
		p := &Processing[S, PS, W]{g: kg, forward: func(c *group.Context[S, PS], key string, w *W) error {
			return out.forward(&run{group: name, kc: c, ctx: c, emits: emits, joins: joins}, key, w)
		}}
		handle := setup(p)
		if handle == nil {
			group.NewOperator(kg, "process", name).Refuse(errors.New("streams: Process " + name + ": setup returned no handler"))
			return kg
		}
		for _, r := range a.input.roots() {
			if r.table != nil {
				continue // refused by assign
			}
			at, _ := r.eventTime.(func(*V) time.Time) // the source holds V (assign)
			group.Stream(kg, r.topic, func(c *group.Context[S, PS], m *msg[V]) error {
				return r.push(&run{group: name, kc: c, ctx: processCall[S, PS, V]{c, handle}, emits: emits, joins: joins}, c.Key(), unwrap(m))
			}, streamOpts(at)...)
		}
		return kg
	}
	b.aggs = append(b.aggs, a)
	return Stream[W]{out}
}

// processKind is a Process's stateful kind (the others are aggregations).
const processKind = "process"

// checkProcess records why a Process's group cannot read its stream's
// sources itself (Build's assign).
func (b *Builder) checkProcess(a *stateful) {
	for _, r := range a.input.roots() {
		switch {
		case r.table != nil && r.table.kind == processKind:
			b.fail("process %s reads what process %s forwards: write it To a topic and process a stream read from that topic", a.name, r.table.name)
		case r.table != nil:
			b.fail("process %s reads table %s's stream: write it To a topic and process a stream read from that topic", a.name, r.table.table)
		case r.typ != a.in:
			b.fail("process %s takes %s values but its source %s holds %s: change the type in the process's handler, or write the stream To a topic and process a stream read from it", a.name, a.in, r.topic, r.typ)
		}
	}
	if a.input.rekeyed {
		b.fail("process %s: after Map or FlatMap, which may change the key, its group would hold state under the source's key: re-key with SelectKey(boundary, topic, fn) first", a.name)
	}
}
