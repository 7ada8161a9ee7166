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
	"github.com/fencestream/fencestream/processors/group/kitpb"
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
//
// State writes are buffered and stored once, when the handler returns, together
// with the input's position and the outputs it produced (see the package doc:
// that is what lets a redelivered input re-emit instead of being applied twice).
type Context[S any, PS codecs.Message[S]] struct {
	g    goka.Context
	grp  *instance[S, PS] // the build of the group the callback runs in
	orig any              // the decoded input value, for dead-lettering

	env     *kitpb.Envelope // the key's stored envelope; loaded on first use
	envRead bool
	// loaded is env as it was read (from the envelope cache or the store);
	// touched: commit began changing it (envcache.go puts back only an
	// envelope that was written or is still as read). held is the cache
	// entry env came from (nil: read from the store), heldSt its decoded
	// state until State hands it over.
	loaded  *kitpb.Envelope
	touched bool
	held    *envEntry
	heldSt  PS
	// deferredOn is the print of the stored envelope when env has deferred
	// advances applied (deferred.go), 0 when it has none.
	deferredOn uint64
	st         PS
	stRead     bool
	dirty      bool // SetState or DeleteState was called
	deleted    bool
	// recording: outputs are collected for the envelope (stream and loop
	// callbacks; not visits, which have no input to replay).
	recording bool
	outputs   []*kitpb.Output
	inDigest  uint64 // digest of an ordered input as it arrived

	// Time (streamtime.go, timers.go).
	eventTime   time.Time
	tick        *kitpb.Tick // the tick being handled, in timer handlers
	timersDirty bool        // SetTimer or CancelTimer changed the envelope's timers
	purge       bool        // remove the key's whole table value (state TTL)
	ticked      bool        // a kit timer tick is being handled
	written     bool        // commit wrote (or deleted) the key's table value

	refused error // the first misused handle (handles.go)
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

// envelope returns the key's stored envelope, or nil when the key has none.
func (c *Context[S, PS]) envelope() *kitpb.Envelope {
	if c.envRead {
		return c.env
	}
	c.envRead = true
	if e := c.grp.envs.take(c.Partition(), c.Key()); e != nil {
		c.env, c.held = e.env, e
		c.heldSt, _ = e.st.(PS)
	} else {
		switch v := c.g.Value().(type) {
		case *kitpb.Envelope:
			c.env = v
		case *codecs.Poison:
			c.grp.m.stateUndecodable.WithLabelValues(c.grp.name).Inc()
			c.Logger().Error("group table value undecodable; starting from empty state", "err", v.Err)
		}
	}
	c.loaded = c.env
	c.deferredOn = c.grp.deferred.apply(c.Partition(), c.Key(), c.env)
	return c.env
}

// release hands the key's envelope back to the envelope cache (envcache.go)
// when the store holds exactly it: commit wrote it, or the callback read it
// and changed nothing. A callback that failed half-way never gets here, so
// its envelope is read from the store next time.
func (c *Context[S, PS]) release() {
	ec := c.grp.envs
	if ec == nil {
		return
	}
	untouched := c.env == c.loaded && c.deferredOn == 0 && !c.touched && !c.dirty && !c.timersDirty
	if c.env == nil || c.purge || !(c.written || untouched) {
		ec.forget(c.Partition(), c.Key(), c.held)
		return
	}
	// The state that goes with env: the one just encoded into it, or the
	// cached one State did not hand over (env's state is unchanged then).
	var st any
	switch {
	case !c.grp.cacheStates:
	case c.dirty && !c.deleted:
		st = c.st
	case !c.dirty && c.heldSt != nil:
		st = c.heldSt
	}
	ec.put(c.Partition(), c.Key(), c.held, c.env, st)
}

// State is the group-table value of the key, or nil when there is none. A value
// that cannot be decoded is counted, logged and treated as absent.
func (c *Context[S, PS]) State() PS {
	if c.dirty {
		return c.st
	}
	if c.stRead {
		return c.st
	}
	c.stRead = true
	if env := c.envelope(); c.heldSt != nil && env.GetHasState() {
		// The envelope cache's entry: env is as the state was encoded into.
		c.st, c.heldSt = c.heldSt, nil
		return c.st
	}
	if env := c.envelope(); c.grp.states != nil && env.GetHasState() {
		if st, ok := c.grp.states.take(c.Partition(), c.Key(), env.GetState()); ok {
			c.st = st
			return st
		}
	}
	st, err := unwrapState[S, PS](c.envelope())
	if err != nil {
		c.grp.m.stateUndecodable.WithLabelValues(c.grp.name).Inc()
		c.Logger().Error("group table value undecodable; starting from empty state", "err", err)
		return nil
	}
	c.st = st
	return st
}

// StateBytes is the key's group-table value as stored, encoded, or nil when
// there is none, it cannot be read, or the handler set or deleted it in this
// callback. A handler that can decide from a scan of the wire form reads it
// instead of State, which decodes the whole value.
func (c *Context[S, PS]) StateBytes() []byte {
	if c.dirty || c.deleted {
		return nil
	}
	env := c.envelope()
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
	c.st, c.dirty, c.deleted = st, true, false
}

// DeleteState removes the key's state. What the kit keeps to recognise
// redeliveries stays until the key's inputs leave the replay window.
func (c *Context[S, PS]) DeleteState() { c.st, c.dirty, c.deleted = nil, true, true }

// emit produces msg to a declared output topic (Out.Emit is the typed way
// in). An invalid key never reaches the broker: the input record is
// dead-lettered instead.
func (c *Context[S, PS]) emit(topic, key string, msg protov2.Message) {
	if err := c.grp.rekeys[c.Topic()+"\x00"+topic]; err != nil {
		c.DeadLetter(ReasonUndeclaredRekey, err)
		return
	}
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(ReasonBadEmitKey, fmt.Errorf("emit to %s: %w", topic, err))
		return
	}
	value, err := marshalOpts.Marshal(msg)
	if err != nil {
		c.DeadLetter(ReasonInvalid, fmt.Errorf("encoding output for %s: %w", topic, err))
		return
	}
	c.send(&kitpb.Output{Topic: topic, Key: key, Value: value})
}

// loopback sends msg to the group's own loop topic under key (LoopOut.Send is
// the typed way in).
func (c *Context[S, PS]) loopback(key string, msg protov2.Message) {
	if err := c.grp.rekeys[c.Topic()+"\x00"+c.grp.loopTopic]; err != nil {
		c.DeadLetter(ReasonUndeclaredRekey, err)
		return
	}
	if err := topology.ValidateKey(key, 0); err != nil {
		c.DeadLetter(ReasonBadEmitKey, fmt.Errorf("loopback: %w", err))
		return
	}
	value, err := marshalOpts.Marshal(msg)
	if err != nil {
		c.DeadLetter(ReasonInvalid, fmt.Errorf("encoding loopback: %w", err))
		return
	}
	c.send(&kitpb.Output{Topic: c.grp.loopTopic, Key: key, Value: value})
}

// send produces one encoded output and, in a stream or loop callback, records
// it so a redelivery of the input can produce exactly the same record again.
func (c *Context[S, PS]) send(o *kitpb.Output) {
	if c.recording {
		c.outputs = append(c.outputs, o)
	}
	c.produce(o)
}

func (c *Context[S, PS]) produce(o *kitpb.Output) {
	if o.GetTopic() == c.grp.loopTopic && c.grp.loopTopic != "" {
		c.g.Loopback(o.GetKey(), o.GetValue())
		return
	}
	var opts []goka.ContextOption
	if len(o.GetHeaders()) > 0 {
		h := goka.Headers{}
		for _, kv := range o.GetHeaders() {
			h[kv.GetKey()] = kv.GetValue()
		}
		opts = append(opts, goka.WithCtxEmitHeaders(h))
	}
	c.g.Emit(goka.Stream(o.GetTopic()), o.GetKey(), o.GetValue(), opts...)
}

// DeadLetter routes the current input record, with its original key and value,
// to the dead-letter topic with a reason, and counts it. A record too large to
// be dead-lettered whole (a dead letter adds headers to a record that may
// already be at its topic's limit) is dead-lettered cut down (deadletter.go),
// so its partition always moves on; so is one too large to be recorded in its
// key's envelope whole.
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
		detail = topology.Excerpt(cause.Error(), deadLetterErrorBytes)
	}
	c.grp.m.deadLetters.WithLabelValues(c.grp.name, c.Topic(), reason).Inc()
	if f := c.grp.onDeadLetter; f != nil {
		f(c.Topic(), reason)
	}
	o := &kitpb.Output{Topic: c.grp.deadLetter, Key: c.g.Key(), Value: value, Headers: []*kitpb.Header{
		{Key: HeaderReason, Value: []byte(reason)},
		{Key: HeaderError, Value: []byte(detail)},
		{Key: HeaderSourceTopic, Value: []byte(c.Topic())},
		{Key: HeaderSourcePartition, Value: []byte(partitionLabel(c.Partition()))},
		{Key: HeaderSourceOffset, Value: []byte(fmt.Sprint(c.Offset()))},
		{Key: HeaderGroup, Value: []byte(c.grp.name)},
	}}
	limit := c.grp.rt.deadLetterBytes
	if c.recording {
		limit = recordedLimit(limit, c.grp.rt.window)
	}
	o, cut := fit(o, limit)
	if cut {
		c.grp.m.deadLettersCut.WithLabelValues(c.grp.name, "cut-down").Inc()
	}
	c.Logger().Warn("dead-lettering record", "topic", c.Topic(), "offset", c.Offset(), "reason", reason, "err", detail,
		"key_bytes", len(c.g.Key()), "value_bytes", len(value), "cut_down", cut)
	c.send(o)
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

// replayed decides, before the handler runs, whether the input was already
// applied to the key's state. A replay is recognised by its position (an
// offset the key's cursor has passed) or, at a new position, by its exact
// bytes (the same record produced twice); never by the HLC alone. A replay
// re-emits what the input emitted then, when that is still recorded. A new
// ordered input whose HLC is not above the last applied is dead-lettered
// (duplicate-hlc or stale). Either way it returns true: the handler must not
// see the input.
func (c *Context[S, PS]) replayed(seq uint64, ordered bool) bool {
	env := c.envelope()
	cur := cursorOf(env, c.Topic(), c.Partition())
	if cur == nil {
		return false
	}
	if applied(cur, c.Offset(), seq, ordered) {
		legacySeq := uint64(c.Offset())
		if ordered {
			legacySeq = seq
		}
		c.replay(env, cur, uint64(cur.GetOffset()-c.Offset()), legacySeq)
		return true
	}
	if !ordered || seq > cur.GetSeq() {
		return false
	}
	if seq == cur.GetSeq() {
		if d := cur.GetDigest(); d != 0 && d == c.digest() {
			// The last applied record produced again (a producer's retry):
			// replayed like a redelivery of it.
			c.Logger().Debug("input is a copy of the last applied (same HLC, same bytes); not applied again", "topic", c.Topic(), "offset", c.Offset(), "applied_offset", cur.GetOffset())
			c.replay(env, cur, 0, seq)
			return true
		}
		c.grp.m.hlcStale.WithLabelValues(c.grp.name, c.Topic(), "duplicate").Inc()
		c.DeadLetter(ReasonDuplicateHLC, fmt.Errorf("%w: HLC %d, applied at offset %d", ErrDuplicateHLC, seq, cur.GetOffset()))
		return true
	}
	c.grp.m.hlcStale.WithLabelValues(c.grp.name, c.Topic(), "stale").Inc()
	c.DeadLetter(ReasonStale, fmt.Errorf("%w: last applied %d, got %d", ErrStale, cur.GetSeq(), seq))
	return true
}

// replay handles a redelivered input: its recorded outputs are produced
// again; one the envelope no longer remembers is counted.
// back is how far before the cursor's head the input is; legacySeq is how a
// legacy envelope (Envelope.sent, Cursor.recent) knows it.
func (c *Context[S, PS]) replay(env *kitpb.Envelope, cur *kitpb.Cursor, back, legacySeq uint64) {
	var outputs []*kitpb.Output
	switch {
	case recordedAt(cur, back) != nil:
		outputs = recordedAt(cur, back).GetOutputs()
	case sentFor(env, c.Topic(), c.Partition(), legacySeq) != nil:
		outputs = sentFor(env, c.Topic(), c.Partition(), legacySeq).GetOutputs()
	case remembered(cur, back) || (len(cur.GetRecent()) > 0 && inWindow(cur, legacySeq)) || c.uncommittedOutputLess():
		c.grp.m.replays.WithLabelValues(c.grp.name, c.Topic(), "no-outputs").Inc()
		return
	default:
		c.grp.m.replays.WithLabelValues(c.grp.name, c.Topic(), "beyond-window").Inc()
		c.Logger().Info("redelivered input is older than what the envelope remembers (it was below the committed offset: the group's offsets were reset, or commits are unknown and it fell out of the replay window); its effect is in the state, its outputs are not re-emitted", "topic", c.Topic(), "offset", c.Offset(), "applied_offset", cur.GetOffset())
		return
	}
	c.grp.m.replays.WithLabelValues(c.grp.name, c.Topic(), "re-emitted").Inc()
	c.Logger().Debug("input already applied; re-emitting its outputs", "topic", c.Topic(), "offset", c.Offset(), "applied_offset", cur.GetOffset()-int64(back), "outputs", len(outputs))
	for _, o := range outputs {
		if o.GetKey() == "" {
			o = &kitpb.Output{Topic: o.GetTopic(), Key: c.Key(), Value: o.GetValue(), Headers: o.GetHeaders()}
		}
		c.produce(o)
	}
}

// uncommittedOutputLess reports whether the input, though not remembered, is
// known to have had no outputs: against a broker trim forgets no input with
// outputs at or above the committed offset, and commits only move forward
// (but for a reset of the group's offsets, the one case no envelope covers).
func (c *Context[S, PS]) uncommittedOutputLess() bool {
	rt := &c.grp.rt
	if !rt.waits || rt.committed == nil {
		return false
	}
	next, ok := rt.committed(c.Topic(), c.Partition())
	return ok && c.Offset() >= next
}

// digest is the FNV-1a digest of the input's encoding (deterministic, so a
// record produced twice has one digest), never 0 (0: none recorded).
func (c *Context[S, PS]) digest() uint64 {
	m, ok := c.orig.(protov2.Message)
	if !ok {
		return 0
	}
	// Encoded into a pooled buffer: this runs for every ordered input.
	bp := c.grp.digestBufs.Get().(*[]byte)
	defer c.grp.digestBufs.Put(bp)
	b, err := marshalOpts.MarshalAppend((*bp)[:0], m)
	if err != nil {
		return 0
	}
	*bp = b
	return max(fnv64a(b), 1)
}

// fnv64a is hash/fnv's FNV-1a of b, without a hash.Hash to allocate.
func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	return h
}

// commit stores the state the handler set, with (for a recorded input) the
// input's position and outputs, in one write. A handler that left the state
// alone writes nothing: run again on a redelivery, it emits the same outputs.
// One that only emitted, on an unordered input, defers its position and
// outputs to the key's next write (deferred.go).
func (c *Context[S, PS]) commit(seq uint64, ordered bool) {
	defer c.indexTimers()
	if c.purge {
		c.g.Delete()
		c.written = true
		c.grp.deferred.written(c.Partition(), c.Key())
		if c.grp.states != nil {
			c.grp.states.drop(c.Partition(), c.Key())
		}
		return
	}
	if !c.dirty && !c.timersDirty && (!c.recording || len(c.outputs) == 0 || c.envelope() == nil) {
		// Nothing to store. A handler that emitted without changing the state
		// of a key that has an envelope still records its outputs (so a
		// redelivery after a later write re-emits them); a key without one
		// gets no table value for it.
		return
	}
	if !c.dirty && !c.timersDirty && !ordered && c.deferAdvance() {
		return // a hop that only routed: its advance goes with the key's next write
	}
	env := c.envelope()
	if env == nil { // a decoded value, or one taken out of the cache: ours to change
		env = &kitpb.Envelope{}
		c.env = env
	}
	c.touched = true
	if c.dirty {
		env.State, env.HasState = nil, false
		if !c.deleted {
			st, err := marshalOpts.Marshal(c.st)
			if err != nil {
				c.g.Fail(fmt.Errorf("group %s: encoding state of %q: %w", c.grp.name, c.Key(), err))
				return
			}
			env.State, env.HasState = st, true
		}
		if sc := c.grp.states; sc != nil {
			if c.deleted {
				sc.drop(c.Partition(), c.Key())
			} else {
				sc.put(c.Partition(), c.Key(), env.State, c.st)
			}
		}
	}
	if c.recording {
		advance(env, c.Topic(), c.Partition(), c.Offset(), seq, c.inDigest, ordered, c.Key(), c.outputs)
	}
	trim(env, c.grp.rt.committed, c.grp.rt.window, !c.grp.rt.waits)
	// The partition's stream time goes with the write, so a restart starts
	// from it (streamtime.go); a tick records the one it was judged at.
	env.StreamMs = max(env.StreamMs, c.grp.clock.watermark(c.Partition()), c.tick.GetStreamMs())
	c.g.SetValue(env)
	c.written = true
	if c.deferredOn != 0 {
		c.grp.deferred.written(c.Partition(), c.Key())
	}
}

// deferAdvance keeps the advance of this callback's input in memory instead
// of writing the key's unchanged envelope (deferred.go), and reports whether
// it did. Only a recorded, unordered input that emitted, on a key with an
// envelope, gets here.
func (c *Context[S, PS]) deferAdvance() bool {
	env := c.envelope()
	base := c.deferredOn
	if base == 0 {
		base = envPrint(env) // env is as stored: nothing was applied to it
	}
	return c.grp.deferred.add(c.Partition(), c.Key(), base, &deferredAdvance{
		topic: c.Topic(), partition: c.Partition(), offset: c.Offset(), outputs: c.outputs,
	}, c.grp.rt.window, c.grp.rt.committed)
}

// indexTimers tells the partition's due-time index (internal/dueindex) what the
// callback wrote of the key's timers, and that a tick was handled. A tick
// that found nothing to fire re-reads the stored timers, so an index that
// disagreed with the store heals instead of sending that key ticks forever.
func (c *Context[S, PS]) indexTimers() {
	x := c.grp.index
	if x == nil {
		return
	}
	switch {
	case c.written && c.purge:
		x.Remove(c.Partition(), c.Key())
	case c.written && c.timersDirty, c.ticked:
		x.Set(c.Partition(), c.Key(), c.envelope().GetTimers())
	}
	if c.ticked {
		x.Handled(c.Partition(), c.Key())
	}
}
