package streams

import (
	"fmt"
	"strings"

	"github.com/fencestream/fencestream/topology"
)

// Describe is the app as text, in the manner of Kafka Streams'
// Topology.describe(): each group with what it reads, the operators it
// runs, what it writes and its table, then each boundary a re-key crosses
// with the order it keeps and the order it loses.
func (a *App) Describe() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "App %s (topology %s)\n", a.name, a.topo.Name)
	for _, g := range a.groups {
		p, _ := a.topo.Processor(g.Name())
		fmt.Fprintf(&sb, "  Group %s: reads %s; writes %s; table %s\n", g.Name(), list(p.Streams), list(without(p.Emits, "deadletter")), orNone(p.Table))
		for _, r := range a.b.rootsOf(g.Name()) {
			a.describe(&sb, r, g.Name(), 2)
		}
	}
	// The app's boundaries: those it added and those the topology already
	// declared for its re-keys.
	// A table's GroupBy and a foreign-key join re-key in a table's group.
	groups := map[string]bool{a.name: true}
	for _, g := range a.groups {
		groups[g.Name()] = true
	}
	var bds []topology.Boundary
	for _, bd := range a.topo.Boundaries {
		if groups[bd.Processor] {
			bds = append(bds, bd)
		}
	}
	if len(bds) > 0 {
		sb.WriteString("  Boundaries\n")
		for _, bd := range bds {
			from, _ := a.topo.Topic(bd.From)
			to, _ := a.topo.Topic(bd.To)
			fmt.Fprintf(&sb, "    %s -> %s (key %s -> %s), in group %s\n      keeps: %s\n      loses: %s\n", bd.From, bd.To, from.Key, to.Key, bd.Processor, bd.Preserved, bd.Lost)
			if bd.Lag != "" {
				fmt.Fprintf(&sb, "      lag: %s\n", bd.Lag)
			}
		}
	}
	return sb.String()
}

func (a *App) describe(sb *strings.Builder, n *node, g string, depth int) {
	pad := strings.Repeat("  ", depth)
	switch {
	case n.topic != "":
		tp, _ := a.topo.Topic(n.topic)
		fmt.Fprintf(sb, "%sSource %s (key %s, %s)\n", pad, n.topic, tp.Key, n.typ)
	case n.table != nil && n.table.kind == processKind:
		fmt.Fprintf(sb, "%sForwarded by process %s (%s; its state %s in %s)\n", pad, n.table.name, n.typ, n.table.typ, n.table.table)
	case n.table != nil && n.table.typ == "fencestream.kit.v1.JoinBuffer":
		fmt.Fprintf(sb, "%sJoined by %s %s (%s; its buffers in %s)\n", pad, n.table.kind, n.table.name, n.typ, n.table.table)
	case n.table != nil && n.table.typ != n.typ:
		// A windowed table holds each key's windows; what flows on is one
		// window's result, keyed key@start, as its emit strategy hands it over.
		fmt.Fprintf(sb, "%sTable %s (%s), each window's %s as it is emitted\n", pad, n.table.table, n.table.typ, n.typ)
	case n.table != nil:
		fmt.Fprintf(sb, "%sTable %s (%s), on each update\n", pad, n.table.table, n.typ)
	case n.term != nil && n.term.rekey:
		fmt.Fprintf(sb, "%s--> write %s across the boundary below (re-key)\n", pad, n.term.topic)
	case n.term != nil && n.term.agg == nil:
		fmt.Fprintf(sb, "%s--> write %s\n", pad, n.term.topic)
	default:
		fmt.Fprintf(sb, "%s--> %s\n", pad, n.label)
	}
	for _, c := range n.children {
		if c.groups[g] {
			a.describe(sb, c, g, depth+1)
		}
	}
}

// Mermaid is the app as a Mermaid flowchart: topics as cylinders, each
// group a subgraph of its operators, each re-key an edge labelled with the
// boundary it crosses.
func (a *App) Mermaid() string {
	var head strings.Builder
	head.WriteString("flowchart LR\n")
	topics := map[string]bool{}
	body := a.mermaid("", func(name string) string {
		id := topology.MermaidID(name)
		if !topics[name] {
			topics[name] = true
			fmt.Fprintf(&head, "  %s[(\"%s\")]\n", id, name)
		}
		return id
	})
	return head.String() + body
}

// mermaidIn is the app's groups and operators as lines to add to the
// flowchart of the topology it runs in (topology.Mermaid), which draws
// its topics: one subgraph, the app, around its groups' subgraphs.
func (a *App) mermaidIn() string {
	return a.mermaid(fmt.Sprintf("app %s: operators", a.name), topology.MermaidID)
}

// mermaid is the app's groups as subgraphs, in one named within if
// within is not "", and the edges between their operators and the topics
// topic names.
func (a *App) mermaid(within string, topic func(name string) string) string {
	var sb strings.Builder
	pad := "  "
	if within != "" {
		fmt.Fprintf(&sb, "  subgraph app_%s [\"%s\"]\n", ident(a.name), quote(within))
		pad = "    "
	}
	var edges []string
	for _, g := range a.groups {
		fmt.Fprintf(&sb, "%ssubgraph g_%s [\"group %s\"]\n", pad, ident(g.Name()), g.Name())
		for i, n := range a.b.nodes {
			if !n.groups[g.Name()] || n.topic != "" || n.table != nil {
				continue
			}
			id := fmt.Sprintf("n%d_%s", i, ident(g.Name()))
			fmt.Fprintf(&sb, "%s  %s[\"%s\"]\n", pad, id, n.label)
			for _, p := range n.parents {
				if !p.groups[g.Name()] {
					continue // the other side of a table join, in its own group
				}
				switch {
				case p.topic != "":
					edges = append(edges, topic(p.topic)+" --> "+id)
				case p.table != nil && p.table.kind == processKind:
					edges = append(edges, fmt.Sprintf("n%d_%s --> %s", a.b.index(a.b.terminalOf(p.table)), ident(g.Name()), id))
				case p.table != nil:
					edges = append(edges, topic(p.table.table)+" --> "+id)
				default:
					edges = append(edges, fmt.Sprintf("n%d_%s --> %s", a.b.index(p), ident(g.Name()), id))
				}
			}
			if n.joined != "" {
				edges = append(edges, topic(n.joined)+" -. joined for the key .-> "+id)
			}
			switch {
			case n.term != nil && n.term.agg != nil:
				edges = append(edges, id+" --> "+topic(n.term.agg.table))
			case n.term != nil && n.term.rekey:
				edges = append(edges, id+" -->|\"re-key: keeps "+quote(a.boundaryOf(n).Preserved)+"\"| "+topic(n.term.topic))
			case n.term != nil:
				edges = append(edges, id+" --> "+topic(n.term.topic))
			}
		}
		sb.WriteString(pad + "end\n")
	}
	if within != "" {
		sb.WriteString("  end\n")
	}
	for _, e := range edges {
		sb.WriteString("  " + e + "\n")
	}
	return sb.String()
}

// boundaryOf is the boundary re-key n crosses: its own, or, when it named
// none, the topology's.
func (a *App) boundaryOf(n *node) topology.Boundary {
	if n.term.boundary.Preserved != "" {
		return n.term.boundary
	}
	for _, r := range n.roots() {
		if bd, ok := a.topo.Boundary(a.name, r.topic, n.term.topic); ok {
			return bd
		}
		if r.table != nil && r.table.input != nil {
			for _, s := range r.table.input.roots() {
				if bd, ok := a.topo.Boundary(r.table.name, s.topic, n.term.topic); ok {
					return bd
				}
			}
		}
	}
	return n.term.boundary
}

// terminalOf is a's node: the aggregation or the process itself.
func (b *Builder) terminalOf(a *stateful) *node {
	for _, n := range b.nodes {
		if n.term != nil && n.term.agg == a {
			return n
		}
	}
	return nil
}

func (b *Builder) index(n *node) int {
	for i, m := range b.nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// rootsOf are the sources and tables group g reads, sources first.
func (b *Builder) rootsOf(g string) []*node {
	var out []*node
	for _, t := range sortedKeys(b.roots) {
		if b.roots[t].groups[g] {
			out = append(out, b.roots[t])
		}
	}
	for _, a := range b.aggs {
		if a.name == g {
			for _, n := range b.nodes {
				if n.table == a {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func ident(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

func quote(s string) string { return strings.ReplaceAll(s, `"`, "'") }

func list(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func without(s []string, drop string) []string {
	var out []string
	for _, x := range s {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}
