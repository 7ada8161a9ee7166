package group

import (
	"errors"
	"time"

	"github.com/fencestream/fencestream/codecs"
)

// Operator is the kit's side of an operator built on a group — a window set,
// a stream join, a versioned table (processors/group/windows and
// processors/group/versioned are built on it, and so can a user's): its name
// in the group's errors and metrics, and its own timer per key. The timer is
// stored and fired like a handler's (effectively once, persisted, in due-time
// order), but its name is in the kit's reserved "kit/" space, so the group's
// OnTimer handler never receives it and Context.SetTimer refuses its name.
type Operator[S any, PS codecs.Message[S]] struct {
	g     *Group[S, PS]
	name  string
	timer string
}

// NewOperator declares an operator of kind (a word: "window", "join") named
// name, unique among g's operators of that kind. Its timer is named
// "kit/<kind>/<name>": stored timers keep that name across releases, so
// neither may change once a group has run.
func NewOperator[S any, PS codecs.Message[S]](g *Group[S, PS], kind, name string) *Operator[S, PS] {
	return &Operator[S, PS]{g: g, name: name, timer: kitTimerPrefix + kind + "/" + name}
}

// Name is the operator's name.
func (o *Operator[S, PS]) Name() string { return o.name }

// Refuse records a problem of the operator's declaration (a bad spec, a nil
// function): building or running the group fails with it, joined with the
// group's other problems.
func (o *Operator[S, PS]) Refuse(err error) { o.g.err = errors.Join(o.g.err, err) }

// OnTimer registers fire as the handler of the operator's timer (and puts the
// group's timer topic in its edges, as OnTimer does).
func (o *Operator[S, PS]) OnTimer(fire func(c *Context[S, PS], t Timer) error) {
	o.g.onKitTimer(o.timer[len(kitTimerPrefix):], fire)
}

// SetTimer sets (or moves) the operator's timer of the key c is handling.
func (o *Operator[S, PS]) SetTimer(c *Context[S, PS], at time.Time, kind TimerKind) error {
	return c.setTimer(o.timer, at, kind)
}

// CancelTimer removes the operator's timer of the key c is handling, if set.
func (o *Operator[S, PS]) CancelTimer(c *Context[S, PS]) { c.CancelTimer(o.timer) }

// StreamTime is the stream time an operator judges a key at: c.StreamTime,
// or kept — the stream time the key's state last recorded — when that is
// later. After a restart the partition's stream time starts unknown, and an
// operator must not reopen what it closed; outside a timer handler the
// partition's clock is raised to kept, so other keys see no earlier time
// than this one did.
func (o *Operator[S, PS]) StreamTime(c *Context[S, PS], kept time.Time) time.Time {
	now := c.StreamTime()
	if kept.After(now) {
		now = kept
		if c.tick == nil {
			c.grp.clock.raise(c.Partition(), kept.UnixMilli())
		}
	}
	return now
}

// CountLate counts a record the operator found late
// (fencestream_window_late_records_total{group, windows: the operator's name}).
func (o *Operator[S, PS]) CountLate(c *Context[S, PS]) {
	c.grp.m.lateRecords.WithLabelValues(o.g.name, o.name).Inc()
}

// CountVersioned counts n records of a versioned table the operator left out
// (fencestream_versioned_records_total{group, table: the operator's name,
// result}).
func (o *Operator[S, PS]) CountVersioned(c *Context[S, PS], result string, n int) {
	c.grp.m.versionedRecords.WithLabelValues(o.g.name, o.name, result).Add(float64(n))
}
