package group

import (
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"runtime/debug"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fencestream/fencestream/codecs"
)

// handleOwner identifies the group a handle (Out, LoopOut, Joined, Looked)
// was declared on. Handles compare owners by pointer, so two groups of the
// same name built twice (two New calls) do not share handles either.
type handleOwner struct{ group string }

// What a group's handles and handlers are checked against, and when:
//
//   - When the group is built (Graph, Processor): every typed edge its
//     registrations made — a stream or loop handler's message type, an
//     Output's, a Join's or Lookup's, the table's state type — against the
//     message the topology declares for that topic (Topic.Value, when it is
//     a protobuf full name), and against the other registrations of the same
//     topic. A handle of the wrong message type is refused there, naming it.
//   - At first use (the input is dead-lettered, reason misused-handle, the
//     processor goes on): a zero handle, one declared on another group, and
//     one declared on this group after the running processor was built (it
//     is not in that processor's graph). Handlers capture handles in
//     closures, which Go does not let the kit inspect when building.

// typedEdge is one message type a registration binds to a topic.
type typedEdge struct {
	what  string // as the refusal names it: "Output gt-out"
	topic string
	msg   protoreflect.FullName
}

func msgName[M any, PM codecs.Message[M]]() protoreflect.FullName {
	return PM(new(M)).ProtoReflect().Descriptor().FullName()
}

// typed records a registration's message type for the build-time check.
func (g *Group[S, PS]) typed(what, topic string, msg protoreflect.FullName) {
	g.typedEdges = append(g.typedEdges, typedEdge{what: what, topic: topic, msg: msg})
}

// newHandle is the owner and sequence number of a handle made now.
func (g *Group[S, PS]) newHandle() (*handleOwner, int) {
	g.handles++
	return g.id, g.handles
}

// typeProblems lists the registrations whose message type is not the one the
// topology declares for their topic, or not the one another registration of
// the topic uses.
func (g *Group[S, PS]) typeProblems() []string {
	var problems []string
	first := map[string]typedEdge{}
	for _, e := range g.typedEdges {
		if t, ok := g.topo.Topic(e.topic); ok {
			if declared := protoreflect.FullName(t.Value); strings.Contains(t.Value, ".") && declared.IsValid() && declared != e.msg {
				problems = append(problems, fmt.Sprintf("%s is typed %s, but the topology declares %s as %s", e.what, e.msg, e.topic, declared))
			}
		}
		if f, ok := first[e.topic]; ok && f.msg != e.msg {
			problems = append(problems, fmt.Sprintf("%s is typed %s, but %s of the same topic is typed %s", e.what, e.msg, f.what, f.msg))
			continue
		}
		first[e.topic] = e
	}
	return problems
}

// Errors of misused handles and failing handlers.
var (
	// ErrMisusedHandle: a handler used a zero handle, or one declared on
	// another group.
	ErrMisusedHandle = errors.New("misused handle")
	// ErrHandlerPanic: a handler panicked.
	ErrHandlerPanic = errors.New("handler panicked")
)

// checkHandle refuses a zero handle, one of another group and one declared
// after this processor was built. The refusal is remembered for the input:
// when the handler returns, its state changes are dropped and the input is
// dead-lettered once (reason misused-handle), so a programming error is
// visible at its first record and never half-applied.
func (c *Context[S, PS]) checkHandle(owner *handleOwner, seq int, what string) error {
	var err error
	switch {
	case owner == nil:
		err = fmt.Errorf("%w: group %s used a zero %s; use the handle its Output, Loop, Join or Lookup call returned", ErrMisusedHandle, c.grp.name, what)
	case owner != c.grp.id:
		err = fmt.Errorf("%w: group %s used a %s declared on another group (%s); each group built declares its own handles, so keep them in the value that builds the group, not in package variables", ErrMisusedHandle, c.grp.name, what, owner.group)
	case seq > c.grp.handles:
		err = fmt.Errorf("%w: group %s used a %s declared after its processor was built; declare every handle before calling Processor", ErrMisusedHandle, c.grp.name, what)
	default:
		return nil
	}
	if c.rec.refused == nil {
		c.rec.refused = err
	}
	return err
}

// call calls a handler. A panic becomes an error (with the stack in the log)
// and so does a misused handle; either way the handler's state and timer
// changes are dropped and the input is dead-lettered, so the processor goes
// on with the next record. Outputs already sent before the failure stay sent.
// Any other error is the handler's own and returned for the caller to
// dead-letter as it always has.
func (r *record[S, PS]) call(handle func() error) (err error) {
	c := &r.c
	defer func() {
		p := recover()
		switch {
		case p != nil:
			c.grp.m.handlerPanics.WithLabelValues(c.grp.name, c.Topic()).Inc()
			c.Logger().Error("handler panicked; the input is dead-lettered and its state changes dropped",
				"topic", c.Topic(), "offset", c.Offset(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.discard()
			c.DeadLetter(deadletter.ReasonPanic, fmt.Errorf("%w: %v", ErrHandlerPanic, p))
			err = nil
		case r.refused != nil:
			c.Logger().Error("handler used a handle that is not its group's; the input is dead-lettered and its state changes dropped", "err", r.refused)
			r.discard()
			c.DeadLetter(deadletter.ReasonMisusedHandle, r.refused)
			err = nil
		}
	}()
	return handle()
}

// discard forgets what a failed handler changed: the buffered state, its
// timers (the envelope is read again from the table) and a TTL purge.
func (r *record[S, PS]) discard() {
	r.dirty, r.deleted, r.timersDirty, r.purge = false, false, false, false
	r.st, r.stRead = nil, false
	r.env, r.envRead = nil, false
}

// callTimer runs a timer handler. A panic is the handler's error: the timer
// is consumed like one whose handler failed, since firing it again would
// panic again, forever (the stack is in the log).
func callTimer[S any, PS codecs.Message[S]](c *Context[S, PS], handle func(*Context[S, PS], Timer) error, tm Timer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.grp.m.handlerPanics.WithLabelValues(c.grp.name, c.Topic()).Inc()
			c.Logger().Error("timer handler panicked", "timer", tm.Name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return handle(c, tm)
}
