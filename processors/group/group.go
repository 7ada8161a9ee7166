package group

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/topology"
)

// Group is a Goka group under construction whose table holds *S per key.
type Group[S any, PS codecs.Message[S]] struct {
	topo       *topology.Topology
	decl       topology.Processor
	name       string
	deadLetter string
	log        *slog.Logger
	edges      []goka.Edge
	inputs     map[string]bool
	outputs    map[string]bool
	loop       bool
	err        error
}

// New starts a group named like its topology declaration. Its table (when the
// declaration has one) holds PS values.
func New[S any, PS codecs.Message[S]](topo *topology.Topology, name string, log *slog.Logger) *Group[S, PS] {
	if log == nil {
		log = slog.Default()
	}
	g := &Group[S, PS]{topo: topo, name: name, log: log.With("group", name), inputs: map[string]bool{}, outputs: map[string]bool{}, deadLetter: topology.TopicDeadLetter}
	decl, ok := topo.Processor(name)
	if !ok {
		g.err = fmt.Errorf("group %s: not declared in topology %s", name, topo.Name)
		return g
	}
	g.decl = decl
	for _, o := range decl.Emits {
		if o == topology.TopicDeadLetter {
			g.edges = append(g.edges, goka.Output(goka.Stream(o), new(codec.Bytes)))
			g.outputs[o] = true
		}
	}
	if decl.Table != "" {
		g.edges = append(g.edges, goka.Persist(codecs.For[S, PS]()))
	}
	return g
}

// Name is the group name.
func (g *Group[S, PS]) Name() string { return g.name }

// Stream registers the handler of a declared stream input whose values are *M.
// The handler returns an error only to reject the record as bad input: the
// record is dead-lettered with reason "invalid" and processing continues.
func Stream[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], topic string, handle func(c *Context[S, PS], msg PM) error) {
	g.inputs[topic] = true
	g.edges = append(g.edges, goka.Input(goka.Stream(topic), codecs.For[M, PM](), wrap(g, handle)))
}

// Loop registers the handler of the group's loop topic (values *M).
func Loop[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], handle func(c *Context[S, PS], msg PM) error) {
	g.loop = true
	g.edges = append(g.edges, goka.Loop(codecs.For[M, PM](), wrap(g, handle)))
}

// Output declares that the group emits *M values to topic.
func Output[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], topic string) {
	g.outputs[topic] = true
	g.edges = append(g.edges, goka.Output(goka.Stream(topic), codecs.For[M, PM]()))
}

// Visitor registers a named visit over every key of the group table
// (Processor.VisitAll); meta is what VisitAll was given.
func Visitor[S any, PS codecs.Message[S], T any](g *Group[S, PS], name string, visit func(c *Context[S, PS], meta T)) {
	g.edges = append(g.edges, goka.Visitor(name, func(gctx goka.Context, meta any) {
		c := &Context[S, PS]{g: gctx, grp: g}
		m, _ := meta.(T)
		visit(c, m)
	}))
}

func wrap[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *Group[S, PS], handle func(*Context[S, PS], PM) error) goka.ProcessCallback {
	return func(gctx goka.Context, value any) {
		c := &Context[S, PS]{g: gctx, grp: g, orig: value}
		recordsProcessed.WithLabelValues(g.name, string(gctx.Topic()), partitionLabel(gctx.Partition())).Inc()
		if err := topology.ValidateKey(gctx.Key(), 0); err != nil {
			c.DeadLetter(ReasonBadKey, err)
			return
		}
		msg, poison, ok := codecs.As[M, PM](value)
		switch {
		case poison != nil:
			c.DeadLetter(ReasonUndecodable, poison)
			return
		case !ok:
			c.DeadLetter(ReasonEmptyValue, fmt.Errorf("no value"))
			return
		}
		if err := handle(c, msg); err != nil {
			c.DeadLetter(ReasonInvalid, err)
		}
	}
}

// Graph returns the Goka group graph after checking that its edges are exactly
// the topology's declaration of this group.
func (g *Group[S, PS]) Graph() (*goka.GroupGraph, error) {
	if g.err != nil {
		return nil, g.err
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
	if g.loop != (g.decl.Loop != "") {
		problems = append(problems, fmt.Sprintf("loop registered=%v but declared loop=%q", g.loop, g.decl.Loop))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("group %s does not match its topology declaration: %s", g.name, strings.Join(problems, "; "))
	}
	gg := goka.DefineGroup(goka.Group(g.name), g.edges...)
	if err := gg.Validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	return gg, nil
}
