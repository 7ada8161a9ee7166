package group

import (
	"context"
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"log/slog"
	"time"

	"github.com/golang/protobuf/proto"
	"github.com/lovoo/goka"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// Context is what a handler sees of the record being processed and of the state
// of its key. It is valid only during the callback.
//
// State writes are buffered and stored once, when the handler returns, together
// with the input's position and the outputs it produced (see the package doc:
// that is what lets a redelivered input re-emit instead of being applied twice).
type Context[S any, PS codecs.Message[S]] struct {
	g   goka.Context
	grp *instance[S, PS] // the build of the group the callback runs in
	rec *record[S, PS]   // the kit's bookkeeping of the record (record.go)
}

// Key is the record key (the partition key of the input).
func (c *Context[S, PS]) Key() string { return c.g.Key() }

// Topic is the input topic (or the visitor name during a visit).
func (c *Context[S, PS]) Topic() string { return string(c.g.Topic()) }

// Partition is the input partition.
func (c *Context[S, PS]) Partition() int32 { return c.g.Partition() }

// Offset is the input offset.
func (c *Context[S, PS]) Offset() int64 { return c.g.Offset() }

// Timestamp is the record's broker/producer timestamp; event time belongs in the message.
func (c *Context[S, PS]) Timestamp() time.Time { return c.g.Timestamp() }

// Header returns one record header.
func (c *Context[S, PS]) Header(name string) []byte { return c.g.Headers()[name] }

// Context is canceled when the processor stops.
func (c *Context[S, PS]) Context() context.Context { return c.g.Context() }

// Logger logs with group, key and partition attached; a key longer than a
// valid one is shown cut (topology.KeyExcerpt).
func (c *Context[S, PS]) Logger() *slog.Logger {
	return c.grp.log.With("key", topology.KeyExcerpt(c.g.Key()), "partition", c.g.Partition())
}

// State is the group-table value of the key, or nil when there is none. A value
// that cannot be decoded is counted, logged and treated as absent.
func (c *Context[S, PS]) State() PS {
	r := c.rec
	if r.dirty || r.stRead {
		return r.st
	}
	r.stRead = true
	env := r.envelope()
	if r.heldSt != nil && env.GetHasState() {
		// The envelope cache's entry: env is as the state was encoded into.
		r.st, r.heldSt = r.heldSt, nil
		return r.st
	}
	if c.grp.states != nil && env.GetHasState() {
		if st, ok := c.grp.states.take(c.Partition(), c.Key(), env.GetState()); ok {
			r.st = st
			return st
		}
	}
	st, err := unwrapState[S, PS](env)
	if err != nil {
		c.grp.m.stateUndecodable.WithLabelValues(c.grp.name).Inc()
		c.Logger().Error("group table value undecodable; starting from empty state", "err", err)
		return nil
	}
	r.st = st
	return st
}

// StateBytes is the key's group-table value as stored, encoded, or nil when
// there is none, it cannot be read, or the handler set or deleted it in this
// callback. A handler that can decide from a scan of the wire form reads it
// instead of State, which decodes the whole value.
func (c *Context[S, PS]) StateBytes() []byte {
	if c.rec.dirty || c.rec.deleted {
		return nil
	}
	env := c.rec.envelope()
	if !env.GetHasState() {
		return nil
	}
	return env.GetState()
}

// SetState sets the key's group-table value. It is stored when the handler
// returns.
func (c *Context[S, PS]) SetState(st PS) {
	if st == nil {
		c.DeleteState()
		return
	}
	c.rec.st, c.rec.dirty, c.rec.deleted = st, true, false
}

// DeleteState removes the key's state. What the kit keeps to recognise
// redeliveries stays until the key's inputs leave the replay window.
func (c *Context[S, PS]) DeleteState() { c.rec.st, c.rec.dirty, c.rec.deleted = nil, true, true }

// emit produces msg to a declared output topic (Out.Emit is the typed way
// in). An invalid key never reaches the broker: the input record is
// dead-lettered instead.
func (c *Context[S, PS]) emit(topic, key string, msg protov2.Message) {
	if err := c.grp.rekeys[c.Topic()+"\x00"+topic]; err != nil {
		c.DeadLetter(deadletter.ReasonUndeclaredRekey, err)
		return
	}
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(deadletter.ReasonBadEmitKey, fmt.Errorf("emit to %s: %w", topic, err))
		return
	}
	value, err := marshalOpts.Marshal(msg)
	if err != nil {
		c.DeadLetter(deadletter.ReasonInvalid, fmt.Errorf("encoding output for %s: %w", topic, err))
		return
	}
	c.rec.send(&kitpb.Output{Topic: topic, Key: key, Value: value})
}

// loopback sends msg to the group's own loop topic under key (LoopOut.Send is
// the typed way in).
func (c *Context[S, PS]) loopback(key string, msg protov2.Message) {
	if err := c.grp.rekeys[c.Topic()+"\x00"+c.grp.loopTopic]; err != nil {
		c.DeadLetter(deadletter.ReasonUndeclaredRekey, err)
		return
	}
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(deadletter.ReasonBadEmitKey, fmt.Errorf("loopback: %w", err))
		return
	}
	value, err := marshalOpts.Marshal(msg)
	if err != nil {
		c.DeadLetter(deadletter.ReasonInvalid, fmt.Errorf("encoding loopback: %w", err))
		return
	}
	c.rec.send(&kitpb.Output{Topic: c.grp.loopTopic, Key: key, Value: value})
}

// DeadLetter routes the current input record, with its original key and value,
// to the dead-letter topic with a reason, and counts it. A record too large to
// be dead-lettered whole (a dead letter adds headers to a record that may
// already be at its topic's limit) is dead-lettered cut down (deadletter.go),
// so its partition always moves on; so is one too large to be recorded in its
// key's envelope whole.
func (c *Context[S, PS]) DeadLetter(reason string, cause error) {
	var value []byte
	switch v := c.rec.orig.(type) {
	case *codecs.Poison:
		value = v.Data
	case protov2.Message:
		value, _ = proto.Marshal(proto.MessageV1(v))
	}
	detail := ""
	if cause != nil {
		detail = topology.Excerpt(cause.Error(), deadLetterErrorBytes)
	}
	c.grp.m.deadLetters.WithLabelValues(c.grp.name, c.Topic(), reason).Inc()
	if f := c.grp.onDeadLetter; f != nil {
		f(c.Topic(), reason)
	}
	o := &kitpb.Output{Topic: c.grp.deadLetter, Key: c.g.Key(), Value: value, Headers: []*kitpb.Header{
		{Key: deadletter.HeaderReason, Value: []byte(reason)},
		{Key: deadletter.HeaderError, Value: []byte(detail)},
		{Key: deadletter.HeaderSourceTopic, Value: []byte(c.Topic())},
		{Key: deadletter.HeaderSourcePartition, Value: []byte(partitionLabel(c.Partition()))},
		{Key: deadletter.HeaderSourceOffset, Value: []byte(fmt.Sprint(c.Offset()))},
		{Key: deadletter.HeaderGroup, Value: []byte(c.grp.name)},
	}}
	limit := c.grp.rt.deadLetterBytes
	if c.rec.recording {
		limit = recordedLimit(limit, c.grp.rt.window)
	}
	o, cut := fit(o, limit)
	if cut {
		c.grp.m.deadLettersCut.WithLabelValues(c.grp.name, "cut-down").Inc()
	}
	c.Logger().Warn("dead-lettering record", "topic", c.Topic(), "offset", c.Offset(), "reason", reason, "err", detail,
		"key_bytes", len(c.g.Key()), "value_bytes", len(value), "cut_down", cut)
	c.rec.send(o)
}

// Errors the kit dead-letters ordered inputs with.
var (
	// ErrStale: the input is new (its position is beyond the key's cursor) but
	// its HLC is below the last one applied for its key.
	ErrStale = errors.New("HLC is below the last applied for this key")
	// ErrDuplicateHLC: the input is new but carries the HLC of the last input
	// applied for its key, with different contents (a device clock of coarse
	// resolution, or a producer reusing HLCs).
	ErrDuplicateHLC = errors.New("HLC is the last applied for this key, from a different record")
	// ErrFutureHLC: the input's HLC is further ahead of the wall clock than the
	// group's maximum skew; applying it would make every later input stale.
	ErrFutureHLC = errors.New("HLC is beyond now plus the maximum clock skew")
	// ErrNoOrder: an ordered stream's input has no HLC to order it by.
	ErrNoOrder = errors.New("input has no HLC")
	// ErrEmptyValue: an ordered stream's input is empty (zero bytes, or
	// only fields at their defaults): there is nothing to order or apply.
	ErrEmptyValue = errors.New("value is empty")
)
