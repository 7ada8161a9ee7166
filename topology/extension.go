package topology

import (
	"fmt"
	"slices"
)

// Extension is what one processor adds to a topology: the topics only it
// declares, its processor declaration(s) and the boundaries of its re-keys.
// A processor's module carries one (host.Module.Declares), and every binary
// that links the module sees it: fencectl topology describe|check,
// fenceview's /v1/topology, the all-in-one runner.
type Extension struct {
	// Name identifies the extension in errors (usually the processor's group).
	Name       string
	Topics     []Topic
	Processors []Processor
	Boundaries []Boundary
}

// Extend adds exts to t and validates the result: on error t is unchanged. A
// topic the extension declares with Partitions 0 gets t.KeyedPartitions, so it
// co-partitions with the topology's keyed topics. An extension may list a topic
// t already has only with an identical declaration (to say which topics it
// relies on); a processor or boundary already declared is an error.
func (t *Topology) Extend(exts ...Extension) error {
	next := t.Clone()
	for _, ext := range exts {
		if err := next.add(ext); err != nil {
			return err
		}
	}
	if err := next.Validate(); err != nil {
		return fmt.Errorf("topology %s extended by %s: %w", t.Name, names(exts), err)
	}
	*t = *next
	return nil
}

func (t *Topology) add(ext Extension) error {
	parts := t.KeyedPartitions
	if parts == 0 {
		parts = DefaultPartitions
	}
	for _, tp := range ext.Topics {
		if tp.Partitions == 0 {
			tp.Partitions = parts
		}
		if have, ok := t.Topic(tp.Name); ok {
			if !sameTopic(have, tp) {
				return fmt.Errorf("extension %s: topic %s is already declared differently (%+v, extension says %+v)", ext.Name, tp.Name, have, tp)
			}
			continue
		}
		t.Topics = append(t.Topics, tp)
	}
	for _, p := range ext.Processors {
		if _, ok := t.Processor(p.Group); ok {
			return fmt.Errorf("extension %s: processor %s is already declared", ext.Name, p.Group)
		}
		t.Processors = append(t.Processors, p)
	}
	for _, b := range ext.Boundaries {
		if _, ok := t.Boundary(b.Processor, b.From, b.To); ok {
			return fmt.Errorf("extension %s: boundary %s -> %s of %s is already declared", ext.Name, b.From, b.To, b.Processor)
		}
		t.Boundaries = append(t.Boundaries, b)
	}
	return nil
}

func sameTopic(a, b Topic) bool {
	return a.Name == b.Name && a.Key == b.Key && a.Partitions == b.Partitions && a.Cleanup == b.Cleanup && a.Salting == b.Salting
}

// Clone returns a copy of t that shares no slice with it.
func (t *Topology) Clone() *Topology {
	c := *t
	c.Topics = slices.Clone(t.Topics)
	c.Processors = slices.Clone(t.Processors)
	c.Boundaries = slices.Clone(t.Boundaries)
	return &c
}

func names(exts []Extension) string {
	s := ""
	for i, e := range exts {
		if i > 0 {
			s += ", "
		}
		s += e.Name
	}
	return s
}
