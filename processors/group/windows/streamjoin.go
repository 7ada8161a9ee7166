package windows

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
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

// JoinSpec describes a windowed stream-stream join, as Kafka Streams'
// JoinWindows.ofTimeDifferenceAndGrace(...).before(...).after(...): a left
// record at t joins the right records of its key in [t-Before, t+After]; a
// right record at t joins the left ones in [t-After, t+Before] (bounds
// inclusive). Before or After may be 0 or negative, not both together below
// 0.
type JoinSpec struct {
	Before, After time.Duration
	// Grace admits out-of-order records. A left record's window closes once
	// stream time is past t + After + Grace (a right record's, t + Before +
	// Grace): an unmatched record is then handed over (LeftJoin, OuterJoin),
	// and one arriving with its window closed is late. A record stays
	// joinable until stream time is past t + Before + After + Grace (Kafka
	// Streams' window store retention, window size plus grace).
	Grace time.Duration
	Kind  JoinKind
}

// JoinWindows is a join of records at most within apart (Before = After =
// within), with grace: Kafka Streams' JoinWindows.ofTimeDifferenceAndGrace.
func JoinWindows(within, grace time.Duration, kind JoinKind) JoinSpec {
	return JoinSpec{Before: within, After: within, Grace: grace, Kind: kind}
}

// WithBefore is s with left records joining right ones down to before
// earlier (Kafka Streams' JoinWindows.before).
func (s JoinSpec) WithBefore(before time.Duration) JoinSpec { s.Before = before; return s }

// WithAfter is s with left records joining right ones up to after later
// (Kafka Streams' JoinWindows.after).
func (s JoinSpec) WithAfter(after time.Duration) JoinSpec { s.After = after; return s }

func (s JoinSpec) validate() error {
	switch {
	case s.Before+s.After < 0:
		return fmt.Errorf("join window before %s plus after %s must not be negative", s.Before, s.After)
	case s.Grace < 0:
		return fmt.Errorf("join grace %s must not be negative", s.Grace)
	case s.Kind != InnerJoin && s.Kind != LeftJoin && s.Kind != OuterJoin:
		return fmt.Errorf("unknown join kind %d", s.Kind)
	}
	return nil
}

// StreamJoin joins two co-partitioned streams of a group by key and event
// time, typed like Join: the group's handlers of the left and right streams
// call AddLeft and AddRight. Its state is a kitpb.JoinBuffer in the key's
// state holding the records still joinable: bounded by the records of a key
// within Before+After+Grace of stream time, and at most MaxWindowsPerKey a
// side (beyond, the oldest leave, handed over unmatched if they joined
// nothing). As for Windows, what it hands over depends on the records in
// partition order only: lateness and expiry are judged at the stream time of
// each record's arrival, or of the key's timer, whichever comes first.
//
// The results of a key come in Kafka Streams' order: a record's arrival
// first hands over the key's unmatched records whose window has closed,
// ordered by time, right before left on a tie; then its pairs, ordered by the
// other record's time, then arrival; a late record (below) then hands itself
// over unmatched if it joined nothing. See the package doc (Stream-stream
// joins) for what differs from Kafka Streams and why.
type StreamJoin[S any, PS codecs.Message[S], L any, PL codecs.Message[L], R any, PR codecs.Message[R]] struct {
	op   *group.Operator[S, PS]
	name string
	spec JoinSpec
	set  func(PS) *kitpb.JoinBuffer
	pair func(c *group.Context[S, PS], st PS, l PL, r PR) error
}

// NewStreamJoin registers a windowed join named name (unique in the group) on
// g. set returns the JoinBuffer field of a key's state, creating it when
// absent. pair is called for each pair, as soon as its second record
// arrives, and (LeftJoin, OuterJoin) for each unmatched record when its
// window closes, with nil for the missing side. The group needs timers
// declared.
func NewStreamJoin[L any, PL codecs.Message[L], R any, PR codecs.Message[R], S any, PS codecs.Message[S]](g *group.Group[S, PS], name string, spec JoinSpec, set func(PS) *kitpb.JoinBuffer, pair func(c *group.Context[S, PS], st PS, l PL, r PR) error) *StreamJoin[S, PS, L, PL, R, PR] {
	j := &StreamJoin[S, PS, L, PL, R, PR]{op: group.NewOperator(g, "join", name), name: name, spec: spec, set: set, pair: pair}
	if err := spec.validate(); err != nil {
		j.op.Refuse(fmt.Errorf("group %s join %s: %w", g.Name(), name, err))
	}
	j.op.OnTimer(j.close)
	return j
}

// closes is the stream time past which a record at t of a side has its
// window closed: no record of the other side arriving in time can join it
// any more (Kafka Streams' outer-join look-back: After for a left record,
// Before for a right one).
func (j *StreamJoin[S, PS, L, PL, R, PR]) closes(t int64, left bool) int64 {
	ahead := j.spec.Before
	if left {
		ahead = j.spec.After
	}
	return t + ahead.Milliseconds() + j.spec.Grace.Milliseconds()
}

// retained is the stream time past which a record at t is joinable no more:
// a record of the other side that is not late can reach back that far.
func (j *StreamJoin[S, PS, L, PL, R, PR]) retained(t int64) int64 {
	return t + j.spec.Before.Milliseconds() + j.spec.After.Milliseconds() + j.spec.Grace.Milliseconds()
}

// nulls reports whether the join hands over a side's unmatched records.
func (j *StreamJoin[S, PS, L, PL, R, PR]) nulls(left bool) bool {
	return j.spec.Kind == OuterJoin || j.spec.Kind == LeftJoin && left
}

// AddLeft joins a left record at event time at with the held right records
// within its window, handing each pair over, and holds it. A record whose
// window has already closed is late: counted, joined with the right records
// still held (handed over unmatched at once under LeftJoin and OuterJoin if
// it joins none), not held, and ErrLate returned.
func (j *StreamJoin[S, PS, L, PL, R, PR]) AddLeft(c *group.Context[S, PS], st PS, at time.Time, l PL) error {
	return j.add(c, st, at, l, true)
}

// AddRight is AddLeft for the right side.
func (j *StreamJoin[S, PS, L, PL, R, PR]) AddRight(c *group.Context[S, PS], st PS, at time.Time, r PR) error {
	return j.add(c, st, at, r, false)
}

func (j *StreamJoin[S, PS, L, PL, R, PR]) add(c *group.Context[S, PS], st PS, at time.Time, msg protov2.Message, left bool) error {
	jb := j.set(st)
	t := at.UnixMilli()
	now := j.op.StreamTime(c, time.UnixMilli(jb.GetClosedMs())).UnixMilli()
	errs := []error{j.advance(c, st, jb, now)}
	b, err := marshalOpts.Marshal(msg)
	if err != nil {
		return fmt.Errorf("join %s: %w", j.name, err)
	}
	rec := &kitpb.JoinRecord{AtMs: t, Value: b}
	mine, other := &jb.Right, jb.Left
	from, to := t-j.spec.After.Milliseconds(), t+j.spec.Before.Milliseconds()
	if left {
		mine, other = &jb.Left, jb.Right
		from, to = t-j.spec.Before.Milliseconds(), t+j.spec.After.Milliseconds()
	}
	for _, o := range other {
		if o.AtMs < from || o.AtMs > to {
			continue
		}
		rec.Matched, o.Matched = true, true
		if left {
			errs = append(errs, j.handOver(c, st, rec, o))
		} else {
			errs = append(errs, j.handOver(c, st, o, rec))
		}
	}
	if j.closes(t, left) < now {
		// Late: Kafka Streams' processor still joins it with what its
		// window store holds (KAFKA-16123) but does not store it.
		jb.Late++
		j.op.CountLate(c)
		if !rec.Matched {
			errs = append(errs, j.expire(c, st, rec, left))
		}
		errs = append(errs, j.arm(c, jb), fmt.Errorf("join %s: record at %s: %w (stream time %s)", j.name, at.UTC().Format(time.RFC3339Nano), ErrLate, time.UnixMilli(now).UTC().Format(time.RFC3339Nano)))
		return errors.Join(errs...)
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
func (j *StreamJoin[S, PS, L, PL, R, PR]) handOver(c *group.Context[S, PS], st PS, l, r *kitpb.JoinRecord) error {
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

// expire hands an unmatched record over alone, if the join kind says so, and
// marks it matched: it is handed over once, and may still join (as Kafka
// Streams' window store still returns it).
func (j *StreamJoin[S, PS, L, PL, R, PR]) expire(c *group.Context[S, PS], st PS, rec *kitpb.JoinRecord, left bool) error {
	if rec.Matched || !j.nulls(left) {
		return nil
	}
	rec.Matched = true
	if left {
		return j.handOver(c, st, rec, nil)
	}
	return j.handOver(c, st, nil, rec)
}

// advance hands over the unmatched records whose window stream time now has
// closed, in Kafka Streams' order (time, right before left on a tie), then
// drops the records no longer joinable.
func (j *StreamJoin[S, PS, L, PL, R, PR]) advance(c *group.Context[S, PS], st PS, jb *kitpb.JoinBuffer, now int64) error {
	var errs []error
	if j.spec.Kind != InnerJoin {
		for i, k := 0, 0; i < len(jb.Left) || k < len(jb.Right); {
			left := k == len(jb.Right) || i < len(jb.Left) && jb.Left[i].AtMs < jb.Right[k].AtMs
			var rec *kitpb.JoinRecord
			if left {
				rec, i = jb.Left[i], i+1
			} else {
				rec, k = jb.Right[k], k+1
			}
			if !rec.Matched && j.closes(rec.AtMs, left) < now {
				errs = append(errs, j.expire(c, st, rec, left))
			}
		}
	}
	for _, side := range []*[]*kitpb.JoinRecord{&jb.Left, &jb.Right} {
		n := 0
		for n < len(*side) && j.retained((*side)[n].AtMs) < now {
			n++
		}
		*side = (*side)[n:]
	}
	jb.ClosedMs = max(jb.ClosedMs, now)
	return errors.Join(errs...)
}

// arm sets the timer just past the next close of an unmatched record to hand
// over, or the next end of retention, whichever comes first.
func (j *StreamJoin[S, PS, L, PL, R, PR]) arm(c *group.Context[S, PS], jb *kitpb.JoinBuffer) error {
	next := int64(math.MaxInt64)
	for _, left := range []bool{true, false} {
		side := jb.Right
		if left {
			side = jb.Left
		}
		if len(side) > 0 {
			next = min(next, j.retained(side[0].AtMs))
		}
		if !j.nulls(left) {
			continue
		}
		for _, r := range side {
			if !r.Matched {
				next = min(next, j.closes(r.AtMs, left))
				break // closes grows with the time, and the side is by time
			}
		}
	}
	if next == math.MaxInt64 {
		j.op.CancelTimer(c)
		return nil
	}
	return j.op.SetTimer(c, time.UnixMilli(next+1), group.StreamClock)
}

func (j *StreamJoin[S, PS, L, PL, R, PR]) close(c *group.Context[S, PS], _ group.Timer) error {
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
