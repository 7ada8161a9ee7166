package group

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/fencestream/fencestream/codecs"
)

// handleOwner identifies the group a handle (Out, LoopOut, Joined, Looked)
// was declared on. Handles compare owners by pointer, so two groups of the
// same name built twice (two New calls) do not share handles either.
type handleOwner struct{ group string }

// Errors of misused handles and failing handlers.
var (
	// ErrMisusedHandle: a handler used a zero handle, or one declared on
	// another group.
	ErrMisusedHandle = errors.New("misused handle")
	// ErrHandlerPanic: a handler panicked.
	ErrHandlerPanic = errors.New("handler panicked")
)

// checkHandle refuses a zero handle and one of another group. The refusal is
// remembered for the input: when the handler returns, its state changes are
// dropped and the input is dead-lettered once (reason misused-handle), so a
// programming error is visible at its first record and never half-applied.
func (c *Context[S, PS]) checkHandle(owner *handleOwner, what string) error {
	var err error
	switch {
	case owner == nil:
		err = fmt.Errorf("%w: group %s used a zero %s; use the handle its Output, Loop, Join or Lookup call returned", ErrMisusedHandle, c.grp.name, what)
	case owner != c.grp.id:
		err = fmt.Errorf("%w: group %s used a %s declared on another group (%s); each group built declares its own handles, so keep them in the value that builds the group, not in package variables", ErrMisusedHandle, c.grp.name, what, owner.group)
	default:
		return nil
	}
	if c.refused == nil {
		c.refused = err
	}
	return err
}

// run calls a handler. A panic becomes an error (with the stack in the log)
// and so does a misused handle; either way the handler's state and timer
// changes are dropped and the input is dead-lettered, so the processor goes
// on with the next record. Outputs already sent before the failure stay sent.
// Any other error is the handler's own and returned for the caller to
// dead-letter as it always has.
func (c *Context[S, PS]) run(handle func() error) (err error) {
	defer func() {
		r := recover()
		switch {
		case r != nil:
			c.grp.m.handlerPanics.WithLabelValues(c.grp.name, c.Topic()).Inc()
			c.Logger().Error("handler panicked; the input is dead-lettered and its state changes dropped",
				"topic", c.Topic(), "offset", c.Offset(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			c.discard()
			c.DeadLetter(ReasonPanic, fmt.Errorf("%w: %v", ErrHandlerPanic, r))
			err = nil
		case c.refused != nil:
			c.Logger().Error("handler used a handle that is not its group's; the input is dead-lettered and its state changes dropped", "err", c.refused)
			c.discard()
			c.DeadLetter(ReasonMisusedHandle, c.refused)
			err = nil
		}
	}()
	return handle()
}

// discard forgets what a failed handler changed: the buffered state, its
// timers (the envelope is read again from the table) and a TTL purge.
func (c *Context[S, PS]) discard() {
	c.dirty, c.deleted, c.timersDirty, c.purge = false, false, false, false
	c.st, c.stRead = nil, false
	c.env, c.envRead = nil, false
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
