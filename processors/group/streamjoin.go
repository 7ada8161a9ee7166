package group

import (
	"errors"
	"fmt"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// JoinKind says which unmatched records a windowed join hands over.
type JoinKind int

const (
	// InnerJoin hands over pairs only.
	InnerJoin JoinKind = iota
	// LeftJoin also hands over each left record that joined nothing, with a
	// nil right, once its window has closed.
	LeftJoin
	// OuterJoin hands over unmatched records of both sides so.
	OuterJoin
)

// JoinSpec describes a windowed stream-stream join (Kafka Streams'
// JoinWindows): a left and a right record of a key join when their event
// times differ by at most Within.
type JoinSpec struct {
	Within time.Duration
	// Grace: a record's join window [t-Within, t+Within] closes once stream
	// time is past t + Within + Grace. A record arriving with its window
	// closed is late; a buffered record whose window closed joins nothing
	// more (and is handed over unmatched under LeftJoin/OuterJoin).
	Grace time.Duration
	Kind  JoinKind
}

// JoinWindows is a join of records at most within apart, with grace.
func JoinWindows(within, grace time.Duration, kind JoinKind) JoinSpec {
	return JoinSpec{Within: within, Grace: grace, Kind: kind}
}

func (s JoinSpec) validate() error {
	switch {
	case s.Within < 0 || s.Grace < 0:
		return fmt.Errorf("join window %s and grace %s must not be negative", s.Within, s.Grace)
	case s.Kind != InnerJoin && s.Kind != LeftJoin && s.Kind != OuterJoin:
		return fmt.Errorf("unknown join kind %d", s.Kind)
	}
	return nil
}

// StreamJoin joins two co-partitioned streams of a group by key and event
// time, typed like Join: the group's handlers of the left and right streams
// call AddLeft and AddRight. Its state is a kitpb.JoinBuffer in the key's
// state holding the records whose window is open: bounded by the records of a
// key within Within+Grace of stream time, and at most MaxWindowsPerKey a side
// (beyond, the oldest leave, handed over unmatched if they joined nothing).
// As for Windows, what it hands over depends on the records in partition
// order only: lateness and expiry are judged at the stream time of each
// record's arrival, or of the key's timer, whichever comes first.
type StreamJoin[S any, PS codecs.Message[S], L any, PL codecs.Message[L], R any, PR codecs.Message[R]] struct {
	g     *Group[S, PS]
	name  string
	spec  JoinSpec
	set   func(PS) *kitpb.JoinBuffer
	pair  func(c *Context[S, PS], st PS, l PL, r PR) error
	timer string
}

// NewStreamJoin registers a windowed join named name (unique in the group) on
// g. set returns the JoinBuffer field of a key's state, creating it when
// absent. pair is called for each pair, as soon as its second record
// arrives, and (LeftJoin, OuterJoin) for each unmatched record when its
// window closes, with nil for the missing side. The group needs timers
// declared.
func NewStreamJoin[L any, PL codecs.Message[L], R any, PR codecs.Message[R], S any, PS codecs.Message[S]](g *Group[S, PS], name string, spec JoinSpec, set func(PS) *kitpb.JoinBuffer, pair func(c *Context[S, PS], st PS, l PL, r PR) error) *StreamJoin[S, PS, L, PL, R, PR] {
	j := &StreamJoin[S, PS, L, PL, R, PR]{g: g, name: name, spec: spec, set: set, pair: pair, timer: kitTimerPrefix + "join/" + name}
	if err := spec.validate(); err != nil {
		g.err = errors.Join(g.err, fmt.Errorf("group %s join %s: %w", g.name, name, err))
	}
	g.onKitTimer("join/"+name, j.close)
	return j
}

// closes is the stream time past which a record at t joins nothing more.
func (j *StreamJoin[S, PS, L, PL, R, PR]) closes(t int64) int64 {
	return t + j.spec.Within.Milliseconds() + j.spec.Grace.Milliseconds()
}

// AddLeft joins a left record at event time at with the buffered right
// records within the window, handing each pair over, and buffers it.
func (j *StreamJoin[S, PS, L, PL, R, PR]) AddLeft(c *Context[S, PS], st PS, at time.Time, l PL) error {
	return j.add(c, st, at, l, true)
}

// AddRight is AddLeft for the right side.
func (j *StreamJoin[S, PS, L, PL, R, PR]) AddRight(c *Context[S, PS], st PS, at time.Time, r PR) error {
	return j.add(c, st, at, r, false)
}

func (j *StreamJoin[S, PS, L, PL, R, PR]) add(c *Context[S, PS], st PS, at time.Time, msg protov2.Message, left bool) error {
	jb := j.set(st)
	t := at.UnixMilli()
	now := c.StreamTime().UnixMilli()
	if jb.GetClosedMs() > now {
		now = jb.GetClosedMs()
		if c.tick == nil {
			c.grp.clock.raise(c.Partition(), now)
		}
	}
	errs := []error{j.advance(c, st, jb, now)}
	if j.closes(t) < now {
		jb.Late++
		c.grp.m.lateRecords.WithLabelValues(j.g.name, j.name).Inc()
		errs = append(errs, fmt.Errorf("join %s: record at %s: %w (stream time %s)", j.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
	}
	b, err := marshalOpts.Marshal(msg)
	if err != nil {
		return fmt.Errorf("join %s: %w", j.name, err)
	}
	rec := &kitpb.JoinRecord{AtMs: t, Value: b}
	mine, other := &jb.Right, jb.Left
	if left {
		mine, other = &jb.Left, jb.Right
	}
	within := j.spec.Within.Milliseconds()
	for _, o := range other {
		if o.AtMs < t-within || o.AtMs > t+within {
			continue
		}
		rec.Matched, o.Matched = true, true
		if left {
			errs = append(errs, j.handOver(c, st, rec, o))
		} else {
			errs = append(errs, j.handOver(c, st, o, rec))
		}
	}
	i, _ := slices.BinarySearchFunc(*mine, t, func(r *kitpb.JoinRecord, t int64) int {
		if r.AtMs <= t {
			return -1
		}
		return 1
	})
	*mine = slices.Insert(*mine, i, rec)
	for len(*mine) > MaxWindowsPerKey {
		errs = append(errs, j.expire(c, st, (*mine)[0], left))
		*mine = (*mine)[1:]
	}
	errs = append(errs, j.arm(c, jb))
	return errors.Join(errs...)
}

// handOver decodes a pair (either may be nil) and calls pair.
func (j *StreamJoin[S, PS, L, PL, R, PR]) handOver(c *Context[S, PS], st PS, l, r *kitpb.JoinRecord) error {
	var lm PL
	var rm PR
	if l != nil {
		lm = PL(new(L))
		if err := protov2.Unmarshal(l.Value, lm); err != nil {
			return fmt.Errorf("join %s: left record at %d: %w", j.name, l.AtMs, err)
		}
	}
	if r != nil {
		rm = PR(new(R))
		if err := protov2.Unmarshal(r.Value, rm); err != nil {
			return fmt.Errorf("join %s: right record at %d: %w", j.name, r.AtMs, err)
		}
	}
	return j.pair(c, st, lm, rm)
}

// expire hands a record leaving the buffer over unmatched, if the join kind
// says so.
func (j *StreamJoin[S, PS, L, PL, R, PR]) expire(c *Context[S, PS], st PS, rec *kitpb.JoinRecord, left bool) error {
	switch {
	case rec.Matched, j.spec.Kind == InnerJoin, !left && j.spec.Kind != OuterJoin:
		return nil
	case left:
		return j.handOver(c, st, rec, nil)
	}
	return j.handOver(c, st, nil, rec)
}

// advance drops, oldest first, the records whose window stream time now has
// closed, handing unmatched ones over (LeftJoin, OuterJoin).
func (j *StreamJoin[S, PS, L, PL, R, PR]) advance(c *Context[S, PS], st PS, jb *kitpb.JoinBuffer, now int64) error {
	var errs []error
	// Both sides in time order, left first on ties, so the unmatched are
	// handed over in a fixed order.
	for len(jb.Left) > 0 || len(jb.Right) > 0 {
		left := len(jb.Right) == 0 || len(jb.Left) > 0 && jb.Left[0].AtMs <= jb.Right[0].AtMs
		side := &jb.Right
		if left {
			side = &jb.Left
		}
		if j.closes((*side)[0].AtMs) >= now {
			// The oldest of this side is open; the other side may still have
			// a closed one only if it is older, which the order rules out.
			break
		}
		errs = append(errs, j.expire(c, st, (*side)[0], left))
		*side = (*side)[1:]
	}
	jb.ClosedMs = max(jb.ClosedMs, now)
	return errors.Join(errs...)
}

// arm sets the timer just past the close of the oldest buffered record.
func (j *StreamJoin[S, PS, L, PL, R, PR]) arm(c *Context[S, PS], jb *kitpb.JoinBuffer) error {
	next := int64(-1)
	for _, side := range [][]*kitpb.JoinRecord{jb.Left, jb.Right} {
		if len(side) > 0 && (next < 0 || side[0].AtMs < next) {
			next = side[0].AtMs
		}
	}
	if next < 0 {
		c.CancelTimer(j.timer)
		return nil
	}
	return c.setTimer(j.timer, time.UnixMilli(j.closes(next)+1), StreamClock)
}

func (j *StreamJoin[S, PS, L, PL, R, PR]) close(c *Context[S, PS], _ Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	jb := j.set(st)
	now := max(c.StreamTime().UnixMilli(), jb.GetClosedMs())
	err := errors.Join(j.advance(c, st, jb, now), j.arm(c, jb))
	c.SetState(st)
	return err
}
