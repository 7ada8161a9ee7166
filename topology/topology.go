package topology

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// DefaultPartitions is over-provisioned on purpose: adding partitions later
// relocates every key, so the count is chosen once.
const DefaultPartitions int32 = 24

// Cleanup is a topic's cleanup.policy.
type Cleanup string

// Cleanup policies.
const (
	CleanupDelete  Cleanup = "delete"
	CleanupCompact Cleanup = "compact"
)

// KeyOriginal is the key of topics that keep whatever key the record had when it
// arrived (the dead-letter topic); writing to them is never a re-key.
const KeyOriginal = "original key"

// Topic declares one topic. Partition counts are permanent: Ensure refuses to run
// against a broker whose topic disagrees.
type Topic struct {
	Name string
	// Key says what the record key is, e.g. "device_id". Edges whose source and
	// target keys differ are re-keys and need a declared Boundary.
	Key string
	// Value names the value schema, e.g. "fencestream.v1.Ping".
	Value      string
	Partitions int32
	Cleanup    Cleanup
	// Salting allows producers to split a hot key into key#0..key#n-1. Only for
	// topics whose consumers do not need per-key order.
	Salting bool
	// Doc is one line on what the topic is for.
	Doc string
}

// EdgeKind says how a processor reaches a topic.
type EdgeKind string

// Edge kinds. Stream and Table edges must be co-partitioned within a processor;
// Broadcast inputs are read whole by every instance (Goka views/lookups).
const (
	EdgeStream    EdgeKind = "stream"    // consumed as a stream, partition by partition
	EdgeBroadcast EdgeKind = "broadcast" // every instance reads every partition
	EdgeJoin      EdgeKind = "join"      // another group's table, read for the current key
	EdgeLookup    EdgeKind = "lookup"    // another group's table, read for any key
	EdgeEmit      EdgeKind = "emit"      // produced to
	EdgeLoop      EdgeKind = "loop"      // Goka loopback: produced to and consumed by the same group
	EdgeTable     EdgeKind = "table"     // the group table (state)
	EdgeTimers    EdgeKind = "timers"    // the kit's timer ticks: produced to and consumed by the same group
)

// Flow is a path of data inside a processor: records of From lead to writes to To.
// A Flow whose From and To keys differ is a re-key and must be a declared Boundary.
type Flow struct {
	From, To string
}

// Processor declares a Goka group: its inputs, outputs and state.
type Processor struct {
	// Group is the Goka group name; its table topic is Group+"-table" and its loop
	// topic Group+"-loop", as Goka names them.
	Group     string
	Streams   []string // co-partitioned stream inputs
	Broadcast []string // inputs every instance reads whole
	Joins     []string // other groups' tables read for the current key (co-partitioned, Goka Join)
	Lookups   []string // other groups' tables read for any key (every instance reads them whole, Goka Lookup)
	Emits     []string
	Loop      string // loop topic, if the group uses Goka's Loopback
	Table     string // group table topic, if the group keeps state
	// Timers is the group's kit-owned timer topic, Group+"-timers", if its
	// handlers set timers (processors/group timers, windows, state TTL).
	Timers string
	Flows  []Flow
	Doc    string
}

// Boundary declares a re-key: the ordering guarantee of From's key ends here, and
// To starts its own. It must say what order survives and what is lost.
type Boundary struct {
	Processor string
	From, To  string
	Preserved string
	Lost      string
	// Lag says how the stream after the boundary relates in time to the one before.
	Lag string
}

// Topology is the declared shape of a pipeline. Build it, then call Validate.
type Topology struct {
	Name       string
	Topics     []Topic
	Processors []Processor
	Boundaries []Boundary
	// KeyedPartitions is the partition count a topic added by an Extension
	// gets when it declares none, so it co-partitions with the topology's
	// keyed topics (0: DefaultPartitions).
	KeyedPartitions int32
}

// Topic returns the declared topic by name.
func (t *Topology) Topic(name string) (Topic, bool) {
	for _, tp := range t.Topics {
		if tp.Name == name {
			return tp, true
		}
	}
	return Topic{}, false
}

// MustTopic is Topic for names the caller declared itself; it panics on a
// programming error, never on input.
func (t *Topology) MustTopic(name string) Topic {
	tp, ok := t.Topic(name)
	if !ok {
		panic(fmt.Sprintf("topology %s: topic %q is not declared", t.Name, name))
	}
	return tp
}

// Processor returns the declared processor by group name.
func (t *Topology) Processor(group string) (Processor, bool) {
	for _, p := range t.Processors {
		if p.Group == group {
			return p, true
		}
	}
	return Processor{}, false
}

// Boundary returns the declared boundary for a flow, if any.
func (t *Topology) Boundary(group, from, to string) (Boundary, bool) {
	for _, b := range t.Boundaries {
		if b.Processor == group && b.From == from && b.To == to {
			return b, true
		}
	}
	return Boundary{}, false
}

// Validation errors; ValidationError wraps one of them.
var (
	ErrUndeclaredTopic  = errors.New("topic is not declared")
	ErrUndeclaredRekey  = errors.New("key changes without a declared boundary")
	ErrNotCopartitioned = errors.New("inputs are not co-partitioned")
	ErrBadDeclaration   = errors.New("bad declaration")
	ErrEmptyBoundary    = errors.New("boundary does not say what order survives and what is lost")
)

// ValidationError names the part of the topology that is wrong.
type ValidationError struct {
	Where  string
	Detail string
	Err    error
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("topology: %s: %v: %s", e.Where, e.Err, e.Detail)
}

func (e *ValidationError) Unwrap() error { return e.Err }

// Validate checks declarations: every referenced topic exists with a positive
// partition count; a processor's stream inputs, loop and table share one partition
// count (Goka co-partitioning); every flow whose key changes is a declared
// Boundary with its guarantees stated; boundaries refer to real flows. All
// problems are returned, joined.
func (t *Topology) Validate() error {
	var errs []error
	bad := func(where string, err error, format string, args ...any) {
		errs = append(errs, &ValidationError{Where: where, Err: err, Detail: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for _, tp := range t.Topics {
		where := "topic " + tp.Name
		switch {
		case tp.Name == "":
			bad("topic", ErrBadDeclaration, "a topic has no name")
		case seen[tp.Name]:
			bad(where, ErrBadDeclaration, "declared twice")
		case tp.Partitions <= 0:
			bad(where, ErrBadDeclaration, "partitions must be positive, got %d", tp.Partitions)
		case tp.Key == "":
			bad(where, ErrBadDeclaration, "key is not declared")
		case tp.Cleanup != CleanupDelete && tp.Cleanup != CleanupCompact:
			bad(where, ErrBadDeclaration, "cleanup policy %q is neither delete nor compact", tp.Cleanup)
		}
		seen[tp.Name] = true
	}
	for _, p := range t.Processors {
		where := "processor " + p.Group
		refs := map[string]bool{}
		for _, e := range p.edges() {
			refs[e.topic] = true
			if !seen[e.topic] {
				bad(where, ErrUndeclaredTopic, "%s edge to %q", e.kind, e.topic)
			}
		}
		if p.Table != "" && p.Table != p.Group+"-table" {
			bad(where, ErrBadDeclaration, "table must be named %q (Goka's naming), got %q", p.Group+"-table", p.Table)
		}
		if p.Timers != "" && p.Timers != TimersTopicName(p.Group) {
			bad(where, ErrBadDeclaration, "timers topic must be named %q, got %q", TimersTopicName(p.Group), p.Timers)
		}
		if p.Timers != "" && p.Table == "" {
			bad(where, ErrBadDeclaration, "timers live in the group table: a group with timers needs a table")
		}
		if p.Loop != "" && p.Loop != p.Group+"-loop" {
			bad(where, ErrBadDeclaration, "loop must be named %q (Goka's naming), got %q", p.Group+"-loop", p.Loop)
		}
		// Goka assigns one partition number across all co-partitioned topics.
		var first string
		var n int32
		for _, name := range p.copartitioned() {
			tp, ok := t.Topic(name)
			if !ok {
				continue
			}
			if first == "" {
				first, n = name, tp.Partitions
			} else if tp.Partitions != n {
				bad(where, ErrNotCopartitioned, "%s has %d partitions but %s has %d: a key would live on different partition numbers", name, tp.Partitions, first, n)
			}
		}
		for _, f := range p.EffectiveFlows(t) {
			if !refs[f.From] || !refs[f.To] {
				bad(where, ErrBadDeclaration, "flow %s -> %s uses a topic the processor does not read or write", f.From, f.To)
				continue
			}
			from, ok1 := t.Topic(f.From)
			to, ok2 := t.Topic(f.To)
			if !ok1 || !ok2 || from.Key == to.Key || to.Key == KeyOriginal {
				continue
			}
			b, ok := t.Boundary(p.Group, f.From, f.To)
			if !ok {
				bad(where, ErrUndeclaredRekey, "flow %s (key %s) -> %s (key %s) re-keys; declare a Boundary saying what order survives and what is lost", f.From, from.Key, f.To, to.Key)
				continue
			}
			if strings.TrimSpace(b.Preserved) == "" || strings.TrimSpace(b.Lost) == "" {
				bad(where, ErrEmptyBoundary, "boundary %s -> %s", f.From, f.To)
			}
		}
	}
	for _, b := range t.Boundaries {
		p, ok := t.Processor(b.Processor)
		if !ok {
			bad("boundary "+b.From+" -> "+b.To, ErrBadDeclaration, "processor %q is not declared", b.Processor)
			continue
		}
		found := false
		for _, f := range p.EffectiveFlows(t) {
			found = found || (f.From == b.From && f.To == b.To)
		}
		if !found {
			bad("boundary "+b.From+" -> "+b.To, ErrBadDeclaration, "processor %s has no such flow", b.Processor)
			continue
		}
		from, ok1 := t.Topic(b.From)
		to, ok2 := t.Topic(b.To)
		if ok1 && ok2 && from.Key == to.Key {
			bad("boundary "+b.From+" -> "+b.To, ErrBadDeclaration, "both topics are keyed by %s: a boundary declares a re-key, and this flow keeps its key", from.Key)
		}
	}
	return errors.Join(errs...)
}

// EffectiveFlows are the processor's flows: those it declares, or, when it
// declares none, the flows its edges imply. Every input (stream, loop,
// timers) may lead to every output and to the loop; the table is written
// under the key being processed, so only inputs with the table's key (and
// the loop and timers) lead to it. A derived flow that changes the key is a
// re-key like a declared one: Validate refuses it without a Boundary. Declare
// Flows to say less than this (a stream that only feeds the loop, say).
func (p Processor) EffectiveFlows(t *Topology) []Flow {
	if len(p.Flows) > 0 {
		return p.Flows
	}
	keyOf := func(name string) string {
		tp, _ := t.Topic(name)
		return tp.Key
	}
	var inputs, writes []string
	inputs = append(inputs, p.Streams...)
	if p.Loop != "" {
		inputs = append(inputs, p.Loop)
		writes = append(writes, p.Loop)
	}
	if p.Timers != "" {
		inputs = append(inputs, p.Timers)
	}
	for _, e := range p.Emits {
		if !Metadata(e) {
			writes = append(writes, e)
		}
	}
	var out []Flow
	for _, in := range inputs {
		for _, w := range writes {
			out = append(out, Flow{From: in, To: w})
		}
		if p.Table != "" && (in == p.Loop || in == p.Timers || keyOf(in) == keyOf(p.Table)) {
			out = append(out, Flow{From: in, To: p.Table})
		}
	}
	return out
}

type edge struct {
	kind  EdgeKind
	topic string
}

func (p Processor) edges() []edge {
	var out []edge
	for _, s := range p.Streams {
		out = append(out, edge{EdgeStream, s})
	}
	for _, s := range p.Broadcast {
		out = append(out, edge{EdgeBroadcast, s})
	}
	for _, s := range p.Joins {
		out = append(out, edge{EdgeJoin, s})
	}
	for _, s := range p.Lookups {
		out = append(out, edge{EdgeLookup, s})
	}
	for _, s := range p.Emits {
		out = append(out, edge{EdgeEmit, s})
	}
	if p.Loop != "" {
		out = append(out, edge{EdgeLoop, p.Loop})
	}
	if p.Table != "" {
		out = append(out, edge{EdgeTable, p.Table})
	}
	if p.Timers != "" {
		out = append(out, edge{EdgeTimers, p.Timers})
	}
	return out
}

func (p Processor) copartitioned() []string {
	out := append(append([]string(nil), p.Streams...), p.Joins...)
	if p.Loop != "" {
		out = append(out, p.Loop)
	}
	if p.Table != "" {
		out = append(out, p.Table)
	}
	if p.Timers != "" {
		out = append(out, p.Timers)
	}
	return out
}

// TopicNames lists declared topic names, sorted.
func (t *Topology) TopicNames() []string {
	out := make([]string, 0, len(t.Topics))
	for _, tp := range t.Topics {
		out = append(out, tp.Name)
	}
	sort.Strings(out)
	return out
}
