package group

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fencestream/fencestream/topology"
)

// Declarer is a group whose declaration can be derived from what its
// handlers registered (every *Group is one).
type Declarer interface {
	Declaration() (topology.Processor, error)
}

// derivedBase is what a group not declared in topo starts from: the
// dead-letter output every group has, and the table, loop and timer topics
// topo declares under the group's conventional names (<group>-table,
// <group>-loop, <group>-timers), which registering uses.
func derivedBase(topo *topology.Topology, name string) topology.Processor {
	p := topology.Processor{Group: name, Emits: []string{topology.TopicDeadLetter}}
	if _, ok := topo.Topic(name + "-table"); ok {
		p.Table = name + "-table"
	}
	if _, ok := topo.Topic(name + "-loop"); ok {
		p.Loop = name + "-loop"
	}
	if _, ok := topo.Topic(topology.TimersTopicName(name)); ok {
		p.Timers = topology.TimersTopicName(name)
	}
	return p
}

// Declaration is the group's topology declaration as its handlers define
// it: the streams with a handler, the outputs registered (and the dead-letter
// topic), the table, the loop if one is registered, the joined and looked-up
// tables, and the timer topic if timers, windows or a TTL are used. What code
// cannot say (topic settings, boundaries, flows narrower than every input to
// every output, a doc line) the declaration's author adds. A group whose
// registrations do not fit the topology (a type that disagrees with a
// topic's, timers without a timer topic) returns why.
func (g *Group[S, PS]) Declaration() (topology.Processor, error) {
	p := topology.Processor{Group: g.name, Table: g.decl.Table, Doc: g.decl.Doc, Flows: slices.Clone(g.decl.Flows)}
	p.Streams = sortedKeys(g.inputs)
	p.Emits = sortedKeys(g.outputs)
	p.Joins = sortedKeys(g.joins)
	p.Lookups = sortedKeys(g.lookups)
	if g.loop {
		p.Loop = g.loopTopic
	}
	if g.timers {
		p.Timers = g.decl.Timers
	}
	var errs []error
	if g.err != nil {
		errs = append(errs, g.err)
	}
	if g.loop && g.loopTopic == "" {
		errs = append(errs, fmt.Errorf("group %s registers a loop but the topology declares no topic %s-loop", g.name, g.name))
	}
	if problems := g.typeProblems(); len(problems) > 0 {
		sort.Strings(problems)
		errs = append(errs, fmt.Errorf("group %s: %s", g.name, strings.Join(problems, "; ")))
	}
	return p, errors.Join(errs...)
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
