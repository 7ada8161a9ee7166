package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	protov2 "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/boundedlog"
	"github.com/fencestream/fencestream/processors/group/internal/dueindex"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Group is a Goka group under construction whose table holds *S per key.
type Group[S any, PS codecs.Message[S]] struct {
	topo       *topology.Topology
	decl       topology.Processor
	name       string
	deadLetter string
	log        *slog.Logger
	// edges are the group's Goka edges, made per build: a callback binds to
	// the instance it runs in (instance), never to the group.
	edges     []func(*instance[S, PS]) goka.Edge
	inputs    map[string]bool
	outputs   map[string]bool
	joins     map[string]bool
	lookups   map[string]bool
	loop      bool
	loopTopic string
	err       error
	// undeclared is why a group whose declaration is derived (derive.go)
	// cannot be built; nil for a declared group.
	undeclared error
	// id is what the handles the group hands out carry: a handle whose id is
	// not the handler's group is refused (handles.go). handles counts them;
	// typedEdges are the message types its registrations bind to topics.
	id         *handleOwner
	handles    int
	typedEdges []typedEdge
	// rekeys maps "from\x00to" to why that write is refused: a key change
	// the topology declares no Boundary for (flows.go).
	rekeys map[string]error
	// Timers (timers.go): whether the timer edges are in, and the handlers.
	timers    bool
	onTimer   func(*Context[S, PS], Timer) error
	kitTimers map[string]func(*Context[S, PS], Timer) error
	// The options of New (options.go): StateTTL's ttl (0: keys never
	// expire), CacheStates' and CacheEnvelopes' budgets (0: no cache),
	// OrderedOutputs, OnDeadLetter's function (nil: none).
	ttl                    time.Duration
	stateBudget, envBudget int
	orderedOutputs         bool
	onDeadLetter           func(topic, reason string)
}

// instance is one build of a group (Processor, Graph): what the group
// registered, plus what its callbacks keep and read at run time — the
// processor's options, the partitions' stream time, the due-time index and
// the metrics. Building never writes to the Group, so two builds of one
// group are two independent processors.
type instance[S any, PS codecs.Message[S]] struct {
	*Group[S, PS]
	rt    runtime
	clock *streamClock
	index *dueindex.Index // nil when the group has no timers
	m     *metrics
	// handles is how many handles the group had made when this build was
	// made: a later one is not in its graph (it shadows Group.handles).
	handles int
	// deferred holds the envelope advances of hops that only routed
	// (once.Deferred); states the decoded states CacheStates keeps (nil:
	// none, statecache.go). All three are this build's own.
	deferred once.Deferred
	states   *stateCache[PS]
	envs     *envCache    // CacheEnvelopes' (nil: none, envcache.go)
	rc       *recordCache // RecordCache's (nil: none, recordcache.go)
	// cacheStates: CacheStates' states are kept in envs' entries (states
	// is nil then).
	cacheStates bool
	// digestBufs are *[]byte to encode an input in for its digest.
	digestBufs sync.Pool
	// records are *record[S, PS] for the next callbacks: a record (and the
	// Context in it) is valid only during its callback, and one per record
	// was a profile's largest allocation of the kit's own on a debouncer's
	// path.
	records sync.Pool
}

// recycle zeroes r, dropping everything it referenced (states, envelopes,
// outputs now owned by caches and envelopes), and keeps it for a next
// callback.
func (in *instance[S, PS]) recycle(r *record[S, PS]) {
	*r = record[S, PS]{}
	in.records.Put(r)
}

// runtime is what callbacks read of the processor's options.
type runtime struct {
	window     int
	maxSkew    time.Duration
	now        func() time.Time
	maxTimers  int
	timerEvery time.Duration
	committed  committedFunc // nil: unknown
	// waits: a key's inputs wait for the commit rather than be trimmed
	// ahead of it (record.awaitRoom, once.Bounds); off under Goka's tester, which commits
	// nothing. hurry, when set, polls the commits faster while one waits.
	waits bool
	hurry func() (release func())
	// deadLetterBytes is the largest dead letter sent whole (deadletter.go).
	deadLetterBytes int
}

// New starts a group named like its topology declaration. Its table (when the
// declaration has one) holds PS values. opts are the options of New (what
// the group is: CacheEnvelopes, CacheStates, StateTTL, OrderedOutputs,
// OnDeadLetter); a bad one, or one of Processor's, is refused when the group
// is built, naming it.
func New[S any, PS codecs.Message[S]](topo *topology.Topology, name string, log *slog.Logger, opts ...Opt) *Group[S, PS] {
	if log == nil {
		log = slog.Default()
	}
	log = boundedlog.New(log) // no log line carries an unbounded key or value
	g := &Group[S, PS]{topo: topo, name: name, log: log.With("group", name), inputs: map[string]bool{}, outputs: map[string]bool{}, joins: map[string]bool{}, lookups: map[string]bool{}, deadLetter: topology.TopicDeadLetter,
		id: &handleOwner{group: name}}
	decl, ok := topo.Processor(name)
	if !ok {
		// Undeclared: the group derives its declaration from what its
		// handlers register (Declaration); building a processor of it
		// needs a topology that declares it (host.Compose does).
		g.undeclared = fmt.Errorf("group %s: not declared in topology %s", name, topo.Name)
		decl = derivedBase(topo, name)
	}
	g.decl = decl
	g.loopTopic = decl.Loop
	g.rekeys = undeclaredRekeys(topo, decl)
	for _, o := range decl.Emits {
		if o == topology.TopicDeadLetter {
			g.edge(goka.Output(goka.Stream(o), new(codec.Bytes)))
			g.outputs[o] = true
		}
	}
	if decl.Table != "" {
		g.typed("the group table's state", decl.Table, msgName[S, PS]())
		g.edge(goka.Persist(envelopeCodec[S, PS]{}))
	}
	cfg := newConfig(atNew, opts)
	if err := cfg.validate(); err != nil {
		g.err = fmt.Errorf("group %s: %w", name, err)
		return g
	}
	g.envBudget, g.stateBudget = cfg.envBudget, cfg.stateBudget
	g.orderedOutputs, g.onDeadLetter = cfg.ordered, cfg.onDeadLetter
	if cfg.ttl > 0 {
		g.expireStates(cfg.ttl)
	}
	return g
}

// edge adds an edge without a callback, the same in every build.
func (g *Group[S, PS]) edge(e goka.Edge) {
	g.edges = append(g.edges, func(*instance[S, PS]) goka.Edge { return e })
}

// Name is the group name.
func (g *Group[S, PS]) Name() string { return g.name }

// StreamOpt configures a stream (or loop) input whose values are *M.
type StreamOpt[M any, PM codecs.Message[M]] func(*streamConfig[M, PM])

// streamConfig's zero value is the default: no order, no event time.
type streamConfig[M any, PM codecs.Message[M]] struct {
	hlc       func(PM) uint64
	eventTime func(PM) time.Time
	// set records which options were given, so a nil function is refused
	// rather than taken for the default.
	hlcSet, eventTimeSet bool
}

func (c *streamConfig[M, PM]) validate() error {
	var errs []error
	if c.hlcSet && c.hlc == nil {
		errs = append(errs, errors.New("OrderedByHLC: nil function"))
	}
	if c.eventTimeSet && c.eventTime == nil {
		errs = append(errs, errors.New("EventTime: nil function"))
	}
	return errors.Join(errs...)
}

// OrderedByHLC declares that hlc(msg) is the input's hybrid logical clock
// (topology/hlc layout: Unix milliseconds << 16 | counter), which must increase
// per key. The kit then enforces it before the handler runs (default: the
// stream has no order and redeliveries are recognised by offset only):
//   - an HLC beyond now plus the group's maximum skew is dead-lettered
//     (reason future-hlc) and the state is left alone;
//   - an HLC equal to one of the key's recent inputs is that input again (a
//     redelivery, or an exact replay by the producer): what it emitted the
//     first time is emitted again, and the handler does not see it;
//   - any other HLC not above the last applied is dead-lettered (reason stale);
//   - an HLC of 0 is dead-lettered (reason invalid).
func OrderedByHLC[M any, PM codecs.Message[M]](hlc func(PM) uint64) StreamOpt[M, PM] {
	return func(c *streamConfig[M, PM]) { c.hlc, c.hlcSet = hlc, true }
}

// Stream registers the handler of a declared stream input whose values are *M.
// The handler returns an error only to reject the record as bad input: the
// record is dead-lettered with reason "invalid" and processing continues.
func Stream[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], topic string, handle func(c *Context[S, PS], msg PM) error, opts ...StreamOpt[M, PM]) {
	g.inputs[topic] = true
	g.typed("Stream "+topic+" handler", topic, msgName[M, PM]())
	sc := streamOpts(g, topic, opts)
	g.edges = append(g.edges, func(in *instance[S, PS]) goka.Edge {
		return goka.Input(goka.Stream(topic), codecs.For[M, PM](), wrap(in, handle, sc))
	})
}

// Loop registers the handler of the group's loop topic (values *M) and returns
// the handle that sends to it.
func Loop[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], handle func(c *Context[S, PS], msg PM) error, opts ...StreamOpt[M, PM]) LoopOut[M, PM] {
	g.loop = true
	if g.loopTopic != "" {
		g.typed("Loop handler", g.loopTopic, msgName[M, PM]())
	}
	sc := streamOpts(g, "loop", opts)
	g.edges = append(g.edges, func(in *instance[S, PS]) goka.Edge {
		return goka.Loop(codecs.For[M, PM](), wrap(in, handle, sc))
	})
	owner, seq := g.newHandle()
	return LoopOut[M, PM]{owner: owner, seq: seq}
}

// Out is a declared output whose records are *M: its Emit accepts nothing
// else, so emitting the wrong message type does not compile, and an M other
// than the message the topology declares for the topic is refused when the
// group is built. It belongs to the group that declared it: emitted from
// another group's handler, as a zero value, or declared after the processor
// was built, it is refused at its first use (the input is dead-lettered with
// reason misused-handle); see handles.go for why not at build.
type Out[M any, PM codecs.Message[M]] struct {
	topic string
	owner *handleOwner
	seq   int
}

// Output declares that the group emits *M values to topic and returns the
// handle handlers emit through.
func Output[M any, PM codecs.Message[M]](g AnyGroup, topic string) Out[M, PM] {
	owner, seq := g.declare(edgeOutput, topic, msgName[M, PM](), goka.Output(goka.Stream(topic), codecs.For[M, PM]()))
	return Out[M, PM]{topic: topic, owner: owner, seq: seq}
}

// AnyGroup is a *Group of any state type: Output, Join and Lookup declare
// their edges on it, so code that does not know a group's state type (the
// stream DSL's writes after an aggregation) can declare them too.
type AnyGroup interface {
	Name() string
	declare(kind edgeKind, topic string, msg protoreflect.FullName, e goka.Edge) (*handleOwner, int)
}

type edgeKind int

const (
	edgeOutput edgeKind = iota
	edgeJoin
	edgeLookup
)

func (g *Group[S, PS]) declare(kind edgeKind, topic string, msg protoreflect.FullName, e goka.Edge) (*handleOwner, int) {
	what := map[edgeKind]string{edgeOutput: "Output ", edgeJoin: "Join ", edgeLookup: "Lookup "}[kind]
	map[edgeKind]map[string]bool{edgeOutput: g.outputs, edgeJoin: g.joins, edgeLookup: g.lookups}[kind][topic] = true
	g.typed(what+topic, topic, msg)
	g.edge(e)
	return g.newHandle()
}

// Topic is the output topic.
func (o Out[M, PM]) Topic() string { return o.topic }

// Emit produces msg under key from the handler whose context is c. An invalid
// key never reaches the broker: the input record is dead-lettered instead.
func (o Out[M, PM]) Emit(c Emitter, key string, msg PM) {
	if err := c.checkHandle(o.owner, o.seq, "Out "+o.topic); err != nil {
		return
	}
	c.emit(o.topic, key, msg)
}

// LoopOut sends *M records to the group's own loop topic. Like Out, it belongs
// to the group whose Loop returned it.
type LoopOut[M any, PM codecs.Message[M]] struct {
	owner *handleOwner
	seq   int
}

// Send loops msg back to the group under key (a re-key: the topology must
// declare the boundary).
func (l LoopOut[M, PM]) Send(c Emitter, key string, msg PM) {
	if err := c.checkHandle(l.owner, l.seq, "LoopOut"); err != nil {
		return
	}
	c.loopback(key, msg)
}

// Emitter is a handler's Context (of any group), for Out.Emit and
// LoopOut.Send.
type Emitter interface {
	emit(topic, key string, msg protov2.Message)
	loopback(key string, msg protov2.Message)
	checkHandle(owner *handleOwner, seq int, what string) error
}

// Visit is a registered visit whose metadata is T.
type Visit[T any] struct{ name string }

// Run visits every key of the group table that p owns, handing each meta.
func (v Visit[T]) Run(ctx context.Context, p *Processor, meta T) error {
	return p.gp().VisitAll(ctx, v.name, meta)
}

// Visitor registers a named visit over every key of the group table
// (Processor.VisitAll); meta is what VisitAll was given. A visit may change the
// key's state, but has no input a redelivery could replay: time-driven work that
// emits belongs in a timer (Context.SetTimer, OnTimer), which runs as a record
// and is effectively-once.
func Visitor[S any, PS codecs.Message[S], T any](g *Group[S, PS], name string, visit func(c *Context[S, PS], meta T)) Visit[T] {
	g.edges = append(g.edges, func(in *instance[S, PS]) goka.Edge {
		return goka.Visitor(name, visitCallback(in, name, visit))
	})
	return Visit[T]{name: name}
}

func visitCallback[S any, PS codecs.Message[S], T any](in *instance[S, PS], name string, visit func(c *Context[S, PS], meta T)) goka.ProcessCallback {
	return func(gctx goka.Context, meta any) {
		r := newRecord(in, gctx, nil)
		defer in.recycle(r)
		c := &r.c
		m, ok := meta.(T)
		if !ok && meta != nil {
			c.Logger().Error("visit skipped: metadata of the wrong type", "visitor", name, "got", fmt.Sprintf("%T", meta), "want", fmt.Sprintf("%T", m))
			return
		}
		// A visit's record path: no input to admit or dedupe.
		if err := r.call(func() error { visit(c, m); return nil }); err != nil {
			c.Logger().Error("visit failed", "visitor", name, "err", err)
		}
		r.commit()
		r.release()
	}
}

// streamOpts applies a stream's options; an invalid one makes the group
// refuse to build.
func streamOpts[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], topic string, opts []StreamOpt[M, PM]) streamConfig[M, PM] {
	var sc streamConfig[M, PM]
	for _, o := range opts {
		o(&sc)
	}
	if err := sc.validate(); err != nil {
		g.err = errors.Join(g.err, fmt.Errorf("group %s stream %s: %w", g.name, topic, err))
	}
	return sc
}

func (rt runtime) checkHLC(h uint64) error {
	if h == 0 {
		return ErrNoOrder
	}
	if limit := rt.now().Add(rt.maxSkew).UnixMilli(); hlc.Wall(h) > limit {
		return fmt.Errorf("%w: HLC time %s, now %s, max skew %s", ErrFutureHLC, hlc.Time(h).UTC().Format(time.RFC3339), rt.now().UTC().Format(time.RFC3339), rt.maxSkew)
	}
	return nil
}

// Graph returns the Goka group graph after checking that its edges are exactly
// the topology's declaration of this group. Its callbacks belong to a build
// of their own with the default options, registering no metrics: Graph is
// for inspecting a group; Processor builds the one that runs.
func (g *Group[S, PS]) Graph() (*goka.GroupGraph, error) {
	cfg := defaultConfig()
	m, err := newMetrics(nil)
	if err != nil {
		return nil, err
	}
	return g.graph(g.instance(&cfg, m, nil))
}

// graph checks the group against its declaration and makes in's Goka graph.
func (g *Group[S, PS]) graph(in *instance[S, PS]) (*goka.GroupGraph, error) {
	if g.err != nil {
		return nil, g.err
	}
	if g.undeclared != nil {
		return nil, g.undeclared
	}
	var problems []string
	want := map[string]bool{}
	for _, s := range g.decl.Streams {
		want[s] = true
		if !g.inputs[s] {
			problems = append(problems, "declared stream input "+s+" has no handler")
		}
	}
	for s := range g.inputs {
		if !want[s] {
			problems = append(problems, "handler for "+s+" which the topology does not declare as a stream input")
		}
	}
	emits := map[string]bool{}
	for _, s := range g.decl.Emits {
		emits[s] = true
		if !g.outputs[s] {
			problems = append(problems, "declared output "+s+" is not registered")
		}
	}
	for s := range g.outputs {
		if !emits[s] {
			problems = append(problems, "output "+s+" is not declared in the topology")
		}
	}
	problems = append(problems, g.typeProblems()...)
	problems = append(problems, sameSet("joined table", g.decl.Joins, g.joins)...)
	problems = append(problems, sameSet("looked-up table", g.decl.Lookups, g.lookups)...)
	if !emits[g.deadLetter] {
		problems = append(problems, fmt.Sprintf("declaration does not list the dead-letter topic %s under Emits: every group dead-letters bad input, so add it (and a flow from each input to it)", g.deadLetter))
	}
	if g.timers != (g.decl.Timers != "") {
		problems = append(problems, fmt.Sprintf("timers used=%v but declared timer topic=%q", g.timers, g.decl.Timers))
	}
	if g.loop != (g.decl.Loop != "") {
		problems = append(problems, fmt.Sprintf("loop registered=%v but declared loop=%q", g.loop, g.decl.Loop))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("group %s does not match its topology declaration: %s", g.name, strings.Join(problems, "; "))
	}
	edges := make([]goka.Edge, len(g.edges))
	for i, e := range g.edges {
		edges[i] = e(in)
	}
	gg := goka.DefineGroup(goka.Group(g.name), edges...)
	if err := gg.Validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	return gg, nil
}

// sameSet reports the differences between what the declaration lists and what
// the group registered.
func sameSet(what string, declared []string, registered map[string]bool) []string {
	var problems []string
	want := map[string]bool{}
	for _, t := range declared {
		want[t] = true
		if !registered[t] {
			problems = append(problems, fmt.Sprintf("declared %s %s is not registered", what, t))
		}
	}
	for t := range registered {
		if !want[t] {
			problems = append(problems, fmt.Sprintf("%s %s is not declared in the topology", what, t))
		}
	}
	return problems
}
