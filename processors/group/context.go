package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/golang/protobuf/proto"
	"github.com/lovoo/goka"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/topology"
)

// Dead-letter record headers.
const (
	HeaderReason          = "fencestream-reason"
	HeaderError           = "fencestream-error"
	HeaderSourceTopic     = "fencestream-source-topic"
	HeaderSourcePartition = "fencestream-source-partition"
	HeaderSourceOffset    = "fencestream-source-offset"
	HeaderGroup           = "fencestream-group"
)

// Context is what a handler sees of the record being processed and of the state
// of its key. It is valid only during the callback.
type Context[S any, PS codecs.Message[S]] struct {
	g    goka.Context
	grp  *Group[S, PS]
	orig any // the decoded input value, for dead-lettering
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

// Logger logs with group, key and partition attached.
func (c *Context[S, PS]) Logger() *slog.Logger {
	return c.grp.log.With("key", c.g.Key(), "partition", c.g.Partition())
}

// State is the group-table value of the key, or nil when there is none. A value
// that cannot be decoded is counted, logged and treated as absent.
func (c *Context[S, PS]) State() PS {
	st, poison, ok := codecs.As[S, PS](c.g.Value())
	if poison != nil {
		stateUndecodable.WithLabelValues(c.grp.name).Inc()
		c.Logger().Error("group table value undecodable; starting from empty state", "err", poison.Err)
		return nil
	}
	if !ok {
		return nil
	}
	return st
}

// SetState writes the key's group-table value.
func (c *Context[S, PS]) SetState(st PS) { c.g.SetValue(st) }

// DeleteState removes the key from the group table.
func (c *Context[S, PS]) DeleteState() { c.g.Delete() }

// Emit produces msg to a declared output topic. An invalid key never reaches the
// broker: the input record is dead-lettered instead.
func (c *Context[S, PS]) Emit(topic, key string, msg protov2.Message) {
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(ReasonBadEmitKey, fmt.Errorf("emit to %s: %w", topic, err))
		return
	}
	c.g.Emit(goka.Stream(topic), key, msg)
}

// Loopback sends msg to the group's own loop topic under key (a re-key: the
// topology must declare the boundary).
func (c *Context[S, PS]) Loopback(key string, msg protov2.Message) {
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(ReasonBadEmitKey, fmt.Errorf("loopback: %w", err))
		return
	}
	c.g.Loopback(key, msg)
}

// DeadLetter routes the current input record, with its original key and value,
// to the dead-letter topic with a reason, and counts it.
func (c *Context[S, PS]) DeadLetter(reason string, cause error) {
	var value []byte
	switch v := c.orig.(type) {
	case *codecs.Poison:
		value = v.Data
	case protov2.Message:
		value, _ = proto.Marshal(proto.MessageV1(v))
	}
	detail := ""
	if cause != nil {
		detail = cause.Error()
	}
	deadLetters.WithLabelValues(c.grp.name, c.Topic(), reason).Inc()
	c.Logger().Warn("dead-lettering record", "topic", c.Topic(), "offset", c.Offset(), "reason", reason, "err", detail)
	c.g.Emit(goka.Stream(c.grp.deadLetter), c.g.Key(), value, goka.WithCtxEmitHeaders(goka.Headers{
		HeaderReason:          []byte(reason),
		HeaderError:           []byte(detail),
		HeaderSourceTopic:     []byte(c.Topic()),
		HeaderSourcePartition: []byte(partitionLabel(c.Partition())),
		HeaderSourceOffset:    []byte(fmt.Sprint(c.Offset())),
		HeaderGroup:           []byte(c.grp.name),
	}))
}

// HLC audit outcomes.
var (
	ErrHLCDecrease  = errors.New("HLC decreased")
	ErrHLCDuplicate = errors.New("HLC repeated")
)

// AuditHLC checks that got (the record's hybrid logical clock) is above last (the
// highest applied for this key). When it is not, the record must not be applied:
// AuditHLC counts it, logs it with key and partition, and returns the reason.
func (c *Context[S, PS]) AuditHLC(last, got uint64) error {
	if got > last {
		return nil
	}
	kind, err := "decrease", ErrHLCDecrease
	if got == last {
		kind, err = "duplicate", ErrHLCDuplicate
	}
	hlcStale.WithLabelValues(c.grp.name, c.Topic(), kind).Inc()
	c.Logger().Warn("stale record not applied: per-key HLC must increase", "topic", c.Topic(), "offset", c.Offset(), "last_hlc", last, "hlc", got, "kind", kind)
	return err
}
