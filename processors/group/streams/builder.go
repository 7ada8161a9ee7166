package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Builder records a DSL app over a topology whose topics it only reads:
// every topic an operator names must be declared there, with the message
// type the operator's values have. Build compiles it to kit groups.
type Builder struct {
	topo  *topology.Topology
	app   string
	log   *slog.Logger
	roots map[string]*node
	nodes []*node
	aggs  []*stateful
	errs  []error
}

// New starts an app named app over topo. Stateless work read straight from
// a source (To, SelectKey, GroupBy) runs in the app's routing group, named
// app, whose table topic app+"-table" (value google.protobuf.Empty) topo
// must declare when there is such work; each aggregation is a group of its
// own, named by the aggregation. A nil log is slog.Default().
func New(topo *topology.Topology, app string, log *slog.Logger) *Builder {
	return &Builder{topo: topo, app: app, log: log, roots: map[string]*node{}}
}

func (b *Builder) fail(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("streams: app %s: "+format, append([]any{b.app}, args...)...))
}

// run is one record's trip through a group's part of the graph.
type run struct {
	group string
	kc    kitContext
	ctx   any // the group's *group.Context, for aggregations
	emits map[*node]emitFn
	joins map[*node]func(c group.Reader) (any, error)
	// old is the aggregation's value before this record, when its table's
	// changes are read (a table join or GroupBy): nil when it had none.
	old any
}

// kitContext is what every group's handler Context offers the DSL.
type kitContext interface {
	group.Emitter
	group.Reader
	DeadLetter(reason string, cause error)
	Key() string
}

type emitFn func(c group.Emitter, key string, v any)

type routingGroup = group.Group[emptypb.Empty, *emptypb.Empty]

// node is one operator. Roots are source topics (topic) or aggregations'
// tables (table); a step transforms a record and hands on what it makes; a
// terminal writes (To, SelectKey) or aggregates.
type node struct {
	b        *Builder
	label    string
	parents  []*node
	children []*node
	topic    string    // a source's topic
	table    *stateful // a table's aggregation
	typ      string    // the value message's full name
	rekeyed  bool      // an operator on the way may have changed the key
	step     func(r *run, key string, v any, next func(key string, v any) error) error
	term     *terminal
	groups   map[string]bool
	// join binds a stream-table join to the group that runs it (Join nodes).
	join   func(g group.AnyGroup) func(c group.Reader) (any, error)
	joined string // the table a join reads
	// eventTime is a source's func(*V) time.Time (EventTime), or nil.
	eventTime any
	// input registers the source topic on a routing group (sources only).
	input func(g *routingGroup, h func(c kitContext, v any) error, log *slog.Logger)
	// joinInput registers it on a windowed join's group (sources only).
	joinInput func(g *joinGroup, h func(c kitContext, v any) error)
}

// terminal is a write or an aggregation.
type terminal struct {
	topic    string
	boundary topology.Boundary // SelectKey's
	rekey    bool
	regroup  bool                          // a table's GroupBy: the re-key runs in the table's group
	output   func(g group.AnyGroup) emitFn // declares the write on the group that runs it
	agg      *stateful
}

func (b *Builder) add(parents []*node, label, typ string) *node {
	n := &node{b: b, label: label, parents: parents, typ: typ, groups: map[string]bool{}}
	for _, p := range parents {
		p.children = append(p.children, n)
		n.rekeyed = n.rekeyed || p.rekeyed
	}
	b.nodes = append(b.nodes, n)
	return n
}

func (n *node) push(r *run, key string, v any) error {
	if !n.groups[r.group] {
		return nil
	}
	if n.term != nil {
		if n.term.agg != nil {
			return n.term.agg.apply(r, key, v)
		}
		r.emits[n](r.kc, key, v)
		return nil
	}
	if n.step == nil {
		return n.forward(r, key, v)
	}
	return n.step(r, key, v, func(k string, w any) error { return n.forward(r, k, w) })
}

func (n *node) forward(r *run, key string, v any) error {
	for _, c := range n.children {
		if err := c.push(r, key, v); err != nil {
			return err
		}
	}
	return nil
}

// roots are the sources and tables n reads from.
func (n *node) roots() []*node {
	if len(n.parents) == 0 {
		return []*node{n}
	}
	var out []*node
	for _, p := range n.parents {
		for _, r := range p.roots() {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// mark says that group runs n and everything n reads from.
func (n *node) mark(group string) {
	if n.groups[group] {
		return
	}
	n.groups[group] = true
	for _, p := range n.parents {
		if p.feeds(group) {
			p.mark(group)
		}
	}
}

// feeds says whether a record handled by group can reach n: a table's
// updates reach only what its own aggregation's group runs (the other side
// of a table join runs in the other table's group).
func (n *node) feeds(group string) bool {
	for _, r := range n.roots() {
		if r.table == nil || r.table.name == group {
			return true
		}
	}
	return false
}

// Group is a compiled group: a *group.Group of some state type.
type Group interface {
	group.Declarer
	Name() string
	Processor(ctx context.Context, cl cluster.Config, opts ...group.Opt) (*group.Processor, error)
	Run(ctx context.Context, cl cluster.Config, opts ...group.Opt) error
}

// App is a compiled DSL app: its groups on the topology extended by their
// declarations and the app's boundaries.
type App struct {
	name   string
	topo   *topology.Topology
	ext    topology.Extension
	groups []Group
	b      *Builder
}

// Build checks the app and compiles it: one routing group for the
// stateless work read straight from sources, one group per aggregation. It
// returns every problem found, joined.
func (b *Builder) Build() (*App, error) {
	if err := b.assign(); err != nil {
		return nil, err
	}
	first, err := b.instantiate(b.topo.Clone())
	if err != nil {
		return nil, err
	}
	ext := topology.Extension{Name: b.app, Boundaries: b.boundaries()}
	for _, g := range first {
		p, err := g.Declaration()
		if err != nil {
			return nil, fmt.Errorf("streams: app %s: %w", b.app, err)
		}
		p.Doc = b.doc(g.Name())
		ext.Processors = append(ext.Processors, p)
	}
	// A topology composed with the app's Module already declares its
	// groups and boundaries: only what it lacks is added.
	add := topology.Extension{Name: ext.Name}
	for _, p := range ext.Processors {
		if _, ok := b.topo.Processor(p.Group); !ok {
			add.Processors = append(add.Processors, p)
		}
	}
	for _, bd := range ext.Boundaries {
		if _, ok := b.topo.Boundary(bd.Processor, bd.From, bd.To); !ok {
			add.Boundaries = append(add.Boundaries, bd)
		}
	}
	topo := b.topo.Clone()
	if err := topo.Extend(add); err != nil {
		return nil, fmt.Errorf("streams: app %s: %w", b.app, err)
	}
	gs, err := b.instantiate(topo)
	if err != nil {
		return nil, err
	}
	return &App{name: b.app, topo: topo, ext: ext, groups: gs, b: b}, nil
}

// assign decides which group runs each node and checks what only the whole
// graph shows.
func (b *Builder) assign() error {
	for _, n := range b.nodes {
		if n.term == nil {
			continue
		}
		if n.term.agg != nil {
			n.mark(n.term.agg.name)
			continue
		}
		for _, r := range n.roots() {
			if r.table != nil {
				n.mark(r.table.name)
				if n.term.rekey && !n.term.regroup {
					b.fail("SelectKey on the stream of table %s: re-key the topic the table's stream (or the process's) is written to instead", r.table.table)
				}
			} else {
				n.mark(b.app)
			}
		}
	}
	for _, n := range b.nodes {
		topic := n.topic
		if n.term != nil && n.term.agg == nil {
			topic = n.term.topic
		}
		for _, g := range sortedKeys(n.groups) {
			if topic != "" && topic == g+"-loop" {
				// Goka names group g's loopback stream g+"-loop" and
				// refuses a processor that reads or writes it directly;
				// without this check the app builds and fails at start.
				b.fail("%s: topic %s is the loop topic of group %s (Goka names a group's loopback stream group+\"-loop\" and refuses it as an input or output): name the topic otherwise", n.label, topic, g)
			}
		}
	}
	for _, a := range b.aggs {
		if a.kind == processKind {
			b.checkProcess(a)
			continue
		}
		if a.input == nil {
			continue // a windowed join: two inputs, checked when declared
		}
		for _, r := range a.input.roots() {
			switch {
			case r.table != nil:
				b.fail("aggregation %s reads table %s's stream: write it To a topic and aggregate a stream read from that topic", a.name, r.table.table)
			case r.typ != a.in:
				b.fail("aggregation %s groups %s values but its source %s holds %s: change the type after aggregating, or write the stream To a topic and group a stream read from it", a.name, a.in, r.topic, r.typ)
			}
		}
		if a.input.rekeyed {
			b.fail("aggregation %s: GroupByKey after Map or FlatMap, which may change the key: use GroupBy(boundary, topic, fn) so the re-key crosses a declared boundary", a.name)
		}
	}
	if b.routes() {
		table := b.app + "-table"
		if tp, ok := b.topo.Topic(table); !ok {
			b.fail("its stateless work (To, SelectKey, GroupBy from a source) runs in group %s, whose table topic %s is not declared (value google.protobuf.Empty, compacted)", b.app, table)
		} else if tp.Value != "google.protobuf.Empty" {
			b.fail("group %s's table %s is declared with value %s, want google.protobuf.Empty", b.app, table, tp.Value)
		}
	}
	for _, bd := range b.boundaries() {
		from, _ := b.topo.Topic(bd.From)
		to, _ := b.topo.Topic(bd.To)
		declared, ok := b.topo.Boundary(bd.Processor, bd.From, bd.To)
		switch {
		case from.Key == to.Key && bd.Preserved+bd.Lost != "":
			b.fail("SelectKey from %s to %s: both topics are keyed by %s, so nothing is re-keyed; use To, or declare %s with its own key", bd.From, bd.To, from.Key, bd.To)
		case from.Key != to.Key && bd.Preserved+bd.Lost == "" && !ok:
			b.fail("re-key from %s (key %s) to %s (key %s) has no boundary: pass the Boundary it crosses, saying what order survives and what is lost", bd.From, from.Key, bd.To, to.Key)
		case ok && bd.Preserved+bd.Lost != "" && declared != bd:
			b.fail("re-key from %s to %s: the topology already declares its boundary differently", bd.From, bd.To)
		}
	}
	return errors.Join(b.errs...)
}

func (b *Builder) routes() bool {
	for _, n := range b.nodes {
		if n.groups[b.app] {
			return true
		}
	}
	return false
}

// boundaries are the re-keys' boundaries the topology does not declare yet,
// with their processor and topics filled in.
func (b *Builder) boundaries() []topology.Boundary {
	var out []topology.Boundary
	for _, n := range b.nodes {
		if n.term == nil || !n.term.rekey {
			continue
		}
		for _, r := range n.roots() {
			proc, froms := b.app, []string{r.topic}
			if r.table != nil {
				if !n.term.regroup {
					continue
				}
				// A table's GroupBy writes from the table's group: the
				// flows are its inputs' to the topic.
				proc, froms = r.table.name, nil
				for _, s := range r.table.input.roots() {
					if s.table == nil {
						froms = append(froms, s.topic)
					}
				}
			}
			for _, f := range froms {
				bd := n.term.boundary
				bd.Processor, bd.From, bd.To = proc, f, n.term.topic
				from, _ := b.topo.Topic(bd.From)
				to, _ := b.topo.Topic(bd.To)
				if _, declared := b.topo.Boundary(proc, bd.From, bd.To); declared || from.Key == to.Key && bd.Preserved+bd.Lost == "" {
					continue
				}
				out = append(out, bd)
			}
		}
	}
	return out
}

// instantiate makes the kit groups on topo.
func (b *Builder) instantiate(topo *topology.Topology) ([]Group, error) {
	var out []Group
	if b.routes() {
		g := group.New[emptypb.Empty](topo, b.app, b.log)
		emits, joins := b.bind(g)
		for _, topic := range sortedKeys(b.roots) {
			r := b.roots[topic]
			if !r.groups[b.app] {
				continue
			}
			r.input(g, func(c kitContext, v any) error {
				return r.push(&run{group: b.app, kc: c, ctx: c, emits: emits, joins: joins}, c.Key(), v)
			}, b.log)
		}
		out = append(out, g)
	}
	for _, a := range b.aggs {
		out = append(out, a.instantiate(topo, b.log))
	}
	return out, nil
}

// bind declares, on g, the writes and joins of the nodes g runs. Writes go
// through msg, as every DSL read: Goka takes one codec per topic, and a
// stream of the app may read a topic another group writes.
func (b *Builder) bind(g group.AnyGroup) (map[*node]emitFn, map[*node]func(group.Reader) (any, error)) {
	emits := map[*node]emitFn{}
	joins := map[*node]func(group.Reader) (any, error){}
	for _, n := range b.nodes {
		if !n.groups[g.Name()] {
			continue
		}
		if n.term != nil && n.term.output != nil {
			emits[n] = n.term.output(g)
		}
		if n.join != nil {
			joins[n] = n.join(g)
		}
	}
	return emits, joins
}

func (b *Builder) doc(name string) string {
	if name == b.app {
		return "stream DSL app " + b.app + ": stateless operators read from sources, re-keys and writes"
	}
	for _, a := range b.aggs {
		if a.name == name {
			return "stream DSL app " + b.app + ": " + a.kind + " into table " + a.table
		}
	}
	return ""
}

func sortedKeys[T any](m map[string]T) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Topology is the app's topology: the one it was built over, extended by
// its groups' derived declarations and its boundaries.
func (a *App) Topology() *topology.Topology { return a.topo }

// Extension is what the app adds to the topology it was built over (for a
// host.Module's Declares, with the app's topics).
func (a *App) Extension() topology.Extension { return a.ext }

// Groups are the app's kit groups, ready to build processors from (and to
// derive declarations from: each is a group.Declarer).
func (a *App) Groups() []Group { return a.groups }

// Run runs every group of the app until ctx ends or one fails, as the kit's
// Group.Run does: each logs "<group> ready" and calls the options' OnReady
// once it has recovered (a binary's readiness covers it).
func (a *App) Run(ctx context.Context, cl cluster.Config, opts ...group.Opt) error {
	eg, ctx := errgroup.WithContext(ctx)
	for _, g := range a.groups {
		eg.Go(func() error { return g.Run(ctx, cl, opts...) })
	}
	return eg.Wait()
}
