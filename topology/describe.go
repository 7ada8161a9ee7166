package topology

import (
	"fmt"
	"strings"
)

// Describe renders the topology as text: topics with their keys and partition
// counts, processors with their flows, and every ordering boundary spelled out.
func (t *Topology) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topology %s\n\ntopics:\n", t.Name)
	for _, tp := range t.Topics {
		salt := ""
		if tp.Salting {
			salt = ", hot keys may be salted"
		}
		fmt.Fprintf(&b, "  %-16s key=%-12s partitions=%-3d cleanup=%-7s value=%s%s\n", tp.Name, tp.Key, tp.Partitions, tp.Cleanup, tp.Value, salt)
	}
	b.WriteString("\nprocessors:\n")
	for _, p := range t.Processors {
		fmt.Fprintf(&b, "  %s: %s\n", p.Group, p.Doc)
		if len(p.Broadcast) > 0 {
			fmt.Fprintf(&b, "    reads whole (every instance): %s\n", strings.Join(p.Broadcast, ", "))
		}
		if len(p.Joins) > 0 {
			fmt.Fprintf(&b, "    joins (same key, co-partitioned): %s\n", strings.Join(p.Joins, ", "))
		}
		if len(p.Lookups) > 0 {
			fmt.Fprintf(&b, "    looks up (any key, every instance): %s\n", strings.Join(p.Lookups, ", "))
		}
		if p.Timers != "" {
			fmt.Fprintf(&b, "    timers (kit-owned, fired by stream time or wall clock): %s\n", p.Timers)
		}
		for _, f := range p.EffectiveFlows(t) {
			from, _ := t.Topic(f.From)
			to, _ := t.Topic(f.To)
			mark := ""
			if _, ok := t.Boundary(p.Group, f.From, f.To); ok {
				mark = "   ═══ ORDERING BOUNDARY"
			}
			fmt.Fprintf(&b, "    %s [%s] -> %s [%s]%s\n", f.From, from.Key, f.To, to.Key, mark)
		}
	}
	if len(t.Boundaries) > 0 {
		b.WriteString("\nordering boundaries:\n")
		for _, bd := range t.Boundaries {
			from, _ := t.Topic(bd.From)
			to, _ := t.Topic(bd.To)
			fmt.Fprintf(&b, "  ═══ %s: %s (key %s) -> %s (key %s)\n", bd.Processor, bd.From, from.Key, bd.To, to.Key)
			fmt.Fprintf(&b, "      preserved: %s\n      lost:      %s\n", bd.Preserved, bd.Lost)
			if bd.Lag != "" {
				fmt.Fprintf(&b, "      lag:       %s\n", bd.Lag)
			}
		}
	}
	return b.String()
}

// Mermaid renders the topology as a Mermaid flowchart; boundary edges are thick
// and labelled.
func (t *Topology) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	id := func(s string) string { return strings.NewReplacer("-", "_", ".", "_", "/", "_").Replace(s) }
	for _, tp := range t.Topics {
		fmt.Fprintf(&b, "  %s[(\"%s<br/>key: %s<br/>%d partitions\")]\n", MermaidID(tp.Name), tp.Name, tp.Key, tp.Partitions)
	}
	for _, p := range t.Processors {
		fmt.Fprintf(&b, "  p_%s[[%s]]\n", id(p.Group), p.Group)
		for _, s := range p.Streams {
			fmt.Fprintf(&b, "  %s --> p_%s\n", MermaidID(s), id(p.Group))
		}
		for _, s := range p.Broadcast {
			fmt.Fprintf(&b, "  %s -. every instance .-> p_%s\n", MermaidID(s), id(p.Group))
		}
		for _, s := range p.Joins {
			fmt.Fprintf(&b, "  %s -. join .-> p_%s\n", MermaidID(s), id(p.Group))
		}
		for _, s := range p.Lookups {
			fmt.Fprintf(&b, "  %s -. lookup .-> p_%s\n", MermaidID(s), id(p.Group))
		}
		if p.Loop != "" {
			fmt.Fprintf(&b, "  %s --> p_%s\n", MermaidID(p.Loop), id(p.Group))
		}
		if p.Timers != "" {
			fmt.Fprintf(&b, "  %s -->|timers| p_%s\n", MermaidID(p.Timers), id(p.Group))
		}
		for _, f := range p.EffectiveFlows(t) {
			to := f.To
			if bd, ok := t.Boundary(p.Group, f.From, f.To); ok {
				fmt.Fprintf(&b, "  p_%s ==>|\"ORDERING BOUNDARY: %s -> %s\"| %s\n", id(p.Group), keyOf(t, bd.From), keyOf(t, bd.To), MermaidID(to))
				continue
			}
			fmt.Fprintf(&b, "  p_%s --> %s\n", id(p.Group), MermaidID(to))
		}
	}
	return b.String()
}

func keyOf(t *Topology, topic string) string {
	tp, _ := t.Topic(topic)
	return tp.Key
}

// MermaidID is topic's node in Mermaid's flowcharts: lines that a module
// adds to the topology's (host.Module.Describe) name a topic by it.
func MermaidID(topic string) string {
	return "t_" + strings.NewReplacer("-", "_", ".", "_", "/", "_").Replace(topic)
}
