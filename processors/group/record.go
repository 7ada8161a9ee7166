package group

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"time"

	"github.com/lovoo/goka"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// The record path: every input (a stream's, the loop's, a timer tick) goes
// through the same stages, in this order, each written once below:
//
//	admit    the key is valid, the value decodes, an ordered input's HLC is
//	         not in the future, the partition's stream time moves;
//	dedupe   the key's envelope is loaded (envelope cache, store, deferred
//	         advances), once.Check decides whether the input was applied
//	         already (a replay re-emits what it emitted then) and a new input
//	         waits while its key's replay window is full of uncommitted ones;
//	run      the handler, with the Context, then the key's TTL touch;
//	commit   the state, the input's position and outputs (once.Advance,
//	         once.Bounds.Trim) and the timers go to the table in one Goka
//	         SetValue; or the advance is deferred to the key's next write; or,
//	         when the handler changed nothing (emit on change), nothing is
//	         written; the due-time index learns the key's timers;
//	release  the envelope goes back to the envelope cache.
//
// A record that admit or dedupe refuses is dead-lettered (or replayed) and
// never reaches the handler. What the protocol decides is once's; this file
// is what the decisions do with Goka.

// record is the kit's bookkeeping of one input while its callback runs. It
// owns the handler's Context (one allocation for both), which points back.
type record[S any, PS codecs.Message[S]] struct {
	c    Context[S, PS]
	orig any // the decoded input value, for dead-lettering
	// seq and inDigest are an ordered input's HLC and digest (input).
	seq, inDigest uint64

	env *kitpb.Envelope // the key's stored envelope; loaded on first use
	// loaded is env as it was read (from the envelope cache or the store).
	// held is the cache entry env came from (nil: read from the store),
	// heldSt its decoded state until State hands it over.
	loaded *kitpb.Envelope
	held   *envEntry
	heldSt PS
	// deferredOn is the print of the stored envelope when env has deferred
	// advances applied (once.Deferred), 0 when it has none.
	deferredOn uint64
	st         PS
	outputs    []*kitpb.Output

	// Time (streamtime.go, timers.go).
	eventTime time.Time
	tick      *kitpb.Tick // the tick being handled, in timer handlers

	refused error // the first misused handle (handles.go)

	// Flags, together (a record is allocated per input).
	ordered bool // the input's stream is OrderedByHLC
	envRead bool
	// touched: commit began changing env (envcache.go puts back only an
	// envelope that was written or is still as read).
	touched bool
	stRead  bool
	dirty   bool // SetState or DeleteState was called
	deleted bool
	// recording: outputs are collected for the envelope (stream and loop
	// callbacks; not visits, which have no input to replay).
	recording   bool
	timersDirty bool // SetTimer or CancelTimer changed the envelope's timers
	purge       bool // remove the key's whole table value (state TTL)
	ticked      bool // a kit timer tick is being handled
	written     bool // commit wrote (or deleted) the key's table value
	cached      bool // env came from the record cache (recordcache.go)
	cacheWrote  bool // commit wrote to the record cache
}

func newRecord[S any, PS codecs.Message[S]](in *instance[S, PS], gctx goka.Context, value any) *record[S, PS] {
	r, _ := in.records.Get().(*record[S, PS])
	if r == nil {
		r = new(record[S, PS])
	}
	r.orig = value
	r.c = Context[S, PS]{g: gctx, grp: in, rec: r}
	return r
}

// input is the input's position as once records it; in a visit, which has
// no input to replay, it is never recorded.
func (r *record[S, PS]) input() once.Input {
	g := r.c.g
	return once.Input{Topic: string(g.Topic()), Partition: g.Partition(), Offset: g.Offset(), Ordered: r.ordered, Seq: r.seq, Digest: r.inDigest}
}

// wrap is the Goka callback of a stream (or loop) handler in one build: the
// record path's stages in order.
func wrap[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](g *instance[S, PS], handle func(*Context[S, PS], PM) error, sc streamConfig[M, PM]) goka.ProcessCallback {
	return func(gctx goka.Context, value any) {
		r := newRecord(g, gctx, value)
		defer g.recycle(r)
		msg, ok := admit(r, value, sc)
		if !ok {
			return // dead-lettered; the key's envelope was not read
		}
		if !r.dedupe() {
			r.release()
			return // replayed or dead-lettered: the handler must not see it
		}
		r.run(func() error { return handle(&r.c, msg) })
		r.commit()
		r.release()
	}
}

// admit checks what can be checked of the input alone and reports whether it
// goes on; a refused input is dead-lettered.
func admit[S any, PS codecs.Message[S], M any, PM codecs.Message[M]](r *record[S, PS], value any, sc streamConfig[M, PM]) (PM, bool) {
	c, g := &r.c, r.c.grp
	g.m.recordProcessed(g.name, string(c.g.Topic()), c.g.Partition())
	if err := topology.ValidateKey(c.g.Key(), 0); err != nil {
		c.DeadLetter(badKey(c.g, err))
		return nil, false
	}
	msg, poison, ok := codecs.As[M, PM](value)
	switch {
	case poison != nil:
		c.DeadLetter(deadletter.ReasonUndecodable, poison)
		return nil, false
	case !ok:
		c.DeadLetter(deadletter.ReasonEmptyValue, fmt.Errorf("no value"))
		return nil, false
	}
	if sc.hlc != nil {
		seq := sc.hlc(msg)
		if seq == 0 && protov2.Size(msg) == 0 {
			c.DeadLetter(deadletter.ReasonEmptyValue, ErrEmptyValue)
			return nil, false
		}
		if err := g.rt.checkHLC(seq); err != nil {
			reason := deadletter.ReasonInvalid
			if errors.Is(err, ErrFutureHLC) {
				reason = deadletter.ReasonFutureHLC
				g.m.hlcStale.WithLabelValues(g.name, c.Topic(), "future").Inc()
			}
			c.DeadLetter(reason, err)
			return nil, false
		}
		// The digest is taken before the handler, which may change msg.
		r.ordered, r.seq, r.inDigest = true, seq, r.digest()
	}
	if sc.eventTime != nil {
		r.eventTime = sc.eventTime(msg)
		g.clock.observe(c.Partition(), r.eventTime.UnixMilli(), g.rt.now())
	} else if g.decl.Timers == "" || c.Topic() != g.decl.Timers {
		// Ticks are not activity: an idle partition must stay idle while
		// its timers fire.
		g.clock.touch(c.Partition(), g.rt.now())
	}
	return msg, true
}

// bounds is what bounds the group's envelopes (once.Bounds) in this build.
func (r *record[S, PS]) bounds() once.Bounds {
	rt := &r.c.grp.rt
	return once.Bounds{Window: rt.window, Committed: rt.committed, Waits: rt.waits}
}

// dedupe decides, before the handler runs, whether the input is new (true).
// One already applied is replayed: what it emitted then is produced again.
// A new ordered input whose HLC is not above the last applied is
// dead-lettered (duplicate-hlc or stale). A new input whose key's replay
// window is full of uncommitted inputs waits for the commit (awaitRoom).
func (r *record[S, PS]) dedupe() bool {
	c, g := &r.c, r.c.grp
	in := r.input()
	v := r.bounds().Check(r.envelope(), in)
	switch v.Kind {
	case once.New:
		r.awaitRoom(in, v.Cursor)
		return true
	case once.Copy:
		c.Logger().Debug("input is a copy of the last applied (same HLC, same bytes); not applied again", "topic", in.Topic, "offset", in.Offset, "applied_offset", v.Cursor.GetOffset())
		r.replay(in, v)
	case once.Replay:
		r.replay(in, v)
	case once.DuplicateHLC:
		g.m.hlcStale.WithLabelValues(g.name, in.Topic, "duplicate").Inc()
		c.DeadLetter(deadletter.ReasonDuplicateHLC, fmt.Errorf("%w: HLC %d, applied at offset %d", ErrDuplicateHLC, in.Seq, v.Cursor.GetOffset()))
	case once.Stale:
		g.m.hlcStale.WithLabelValues(g.name, in.Topic, "stale").Inc()
		c.DeadLetter(deadletter.ReasonStale, fmt.Errorf("%w: last applied %d, got %d", ErrStale, v.Cursor.GetSeq(), in.Seq))
	}
	return false
}

// replay produces a replayed input's recorded outputs again; one the
// envelope no longer remembers is counted.
func (r *record[S, PS]) replay(in once.Input, v once.Verdict) {
	c, g := &r.c, r.c.grp
	switch {
	case v.Memory == once.OutputLess:
		g.m.replays.WithLabelValues(g.name, in.Topic, "no-outputs").Inc()
		return
	case v.Memory == once.Forgotten:
		g.m.replays.WithLabelValues(g.name, in.Topic, "beyond-window").Inc()
		c.Logger().Info("redelivered input is older than what the envelope remembers (it was below the committed offset: the group's offsets were reset, or commits are unknown and it fell out of the replay window); its effect is in the state, its outputs are not re-emitted", "topic", in.Topic, "offset", in.Offset, "applied_offset", v.Cursor.GetOffset())
		return
	}
	g.m.replays.WithLabelValues(g.name, in.Topic, "re-emitted").Inc()
	c.Logger().Debug("input already applied; re-emitting its outputs", "topic", in.Topic, "offset", in.Offset, "applied_offset", v.Cursor.GetOffset()-int64(v.Back), "outputs", len(v.Outputs))
	for _, o := range v.Outputs {
		if o.GetKey() == "" {
			o = &kitpb.Output{Topic: o.GetTopic(), Key: c.Key(), Value: o.GetValue(), Headers: o.GetHeaders()}
		}
		r.produce(o)
	}
}

// awaitRoom runs before a new input is applied. When the key's cursor of the
// input's partition already holds the outputs of ReplayWindow inputs the
// group has not committed (once.Bounds.Full), applying another would make the
// envelope either outgrow the window or forget outputs that may not have
// reached the broker. So the callback waits until the committed offset
// passes the oldest: Goka marks each earlier input once its outputs are
// acknowledged, and sarama commits the marks meanwhile, so only this
// partition pauses, and only as long as commits are behind. When the
// callback's context ends (a rebalance, a stop) it stops waiting and the
// input is applied with nothing forgotten, as are the few Goka may still hand
// over after that: the envelope holds them beyond the window until the next
// commit. Under Goka's tester, or with the committed offsets unknown, nothing
// waits and the window alone bounds.
func (r *record[S, PS]) awaitRoom(in once.Input, cur *kitpb.Cursor) {
	b := r.bounds()
	oldest, next, full := b.Full(cur)
	if !full {
		return
	}
	ctx := r.c.g.Context()
	if ctx.Err() != nil {
		return // an input Goka hands over after the context ended: applied
	}
	g, rt := r.c.grp, &r.c.grp.rt
	topic, part := in.Topic, in.Partition
	g.m.windowWaits.WithLabelValues(g.name, topic).Inc()
	log := r.c.Logger().With("topic", topic, "offset", in.Offset, "oldest_uncommitted", oldest, "committed", next, "window", rt.window)
	log.Info("key has a replay window of uncommitted inputs; waiting for the group's offset commit before applying the next")
	if rt.hurry != nil {
		defer rt.hurry()()
	}
	start := time.Now()
	t := time.NewTimer(commitWaitPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopped waiting for the offset commit (the partition is stopping); input applied, the envelope keeps one more than the window", "waited", time.Since(start))
			return
		case <-t.C:
		}
		if next, passed := b.Passed(topic, part, oldest); passed {
			log.Debug("offset commit passed the oldest input; applying", "waited", time.Since(start), "committed", next)
			return
		}
		t.Reset(commitWaitPoll)
	}
}

// run calls the handler of a new input with outputs recorded, dead-letters
// the input when it returns an error, and moves the key's expiry.
func (r *record[S, PS]) run(handle func() error) {
	r.recording = true
	if err := r.call(handle); err != nil {
		r.c.DeadLetter(deadletter.ReasonInvalid, err)
	}
	r.c.grp.touchTTL(&r.c)
}

// envelope returns the key's stored envelope, or nil when the key has none.
func (r *record[S, PS]) envelope() *kitpb.Envelope {
	if r.envRead {
		return r.env
	}
	r.envRead = true
	c, g := &r.c, r.c.grp
	if r.fromCache() {
	} else if e := g.envs.take(c.Partition(), c.Key()); e != nil {
		r.env, r.held = e.env, e
		r.heldSt, _ = e.st.(PS)
	} else {
		switch v := c.g.Value().(type) {
		case *kitpb.Envelope:
			r.env = v
		case *codecs.Poison:
			g.m.stateUndecodable.WithLabelValues(g.name).Inc()
			c.Logger().Error("group table value undecodable; starting from empty state", "err", v.Err)
		}
	}
	r.loaded = r.env
	r.deferredOn = g.deferred.Apply(c.Partition(), c.Key(), r.env)
	return r.env
}

// mutableEnvelope returns the key's envelope, creating an empty one to be
// stored at commit.
func (r *record[S, PS]) mutableEnvelope() *kitpb.Envelope {
	if r.envelope() == nil {
		r.env = &kitpb.Envelope{}
	}
	return r.env
}

// digest is the digest of the input's encoding (once.Digest), 0 when it is
// not a message.
func (r *record[S, PS]) digest() uint64 {
	m, ok := r.orig.(protov2.Message)
	if !ok {
		return 0
	}
	// Encoded into a pooled buffer: this runs for every ordered input.
	g := r.c.grp
	bp := g.digestBufs.Get().(*[]byte)
	defer g.digestBufs.Put(bp)
	b, err := marshalOpts.MarshalAppend((*bp)[:0], m)
	if err != nil {
		return 0
	}
	*bp = b
	return once.Digest(b)
}

// send produces one encoded output and, in a stream or loop callback, records
// it so a redelivery of the input can produce exactly the same record again.
func (r *record[S, PS]) send(o *kitpb.Output) {
	if r.recording {
		r.outputs = append(r.outputs, o)
	}
	r.produce(o)
}

func (r *record[S, PS]) produce(o *kitpb.Output) {
	g := r.c.grp
	if o.GetTopic() == g.loopTopic && g.loopTopic != "" {
		r.c.g.Loopback(o.GetKey(), o.GetValue())
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
	r.c.g.Emit(goka.Stream(o.GetTopic()), o.GetKey(), o.GetValue(), opts...)
}

// commit stores the state the handler set, with (for a recorded input) the
// input's position and outputs, in one write. A handler that left the state
// alone writes nothing: run again on a redelivery, it emits the same outputs.
// One that only emitted, on an unordered input, defers its position and
// outputs to the key's next write (once.Deferred).
func (r *record[S, PS]) commit() {
	defer r.indexTimers()
	c, g := &r.c, r.c.grp
	if r.purge {
		if !r.cacheDelete() {
			c.g.Delete()
		}
		r.written = true
		g.deferred.Written(c.Partition(), c.Key())
		if g.states != nil {
			g.states.drop(c.Partition(), c.Key())
		}
		return
	}
	if !r.dirty && !r.timersDirty && (!r.recording || len(r.outputs) == 0 || r.envelope() == nil) {
		// Nothing to store. A handler that emitted without changing the state
		// of a key that has an envelope still records its outputs (so a
		// redelivery after a later write re-emits them); a key without one
		// gets no table value for it.
		return
	}
	if !r.dirty && !r.timersDirty && !r.ordered && r.deferAdvance() {
		return // a hop that only routed: its advance goes with the key's next write
	}
	var st []byte
	if r.dirty && !r.deleted {
		var err error
		if st, err = marshalOpts.Marshal(r.st); err != nil {
			c.g.Fail(fmt.Errorf("group %s: encoding state of %q: %w", g.name, c.Key(), err))
			return
		}
	}
	if r.unchanged(st) {
		return // emit on change: nothing to write (package doc)
	}
	env := r.envelope()
	if env == nil { // a decoded value, or one taken out of the cache: ours to change
		env = &kitpb.Envelope{}
		r.env = env
	}
	r.touched = true
	if r.dirty {
		env.State, env.HasState = st, !r.deleted
		if sc := g.states; sc != nil {
			if r.deleted {
				sc.drop(c.Partition(), c.Key())
			} else {
				sc.put(c.Partition(), c.Key(), env.State, r.st)
			}
		}
	}
	b := r.bounds()
	if r.recording {
		once.Advance(env, r.input(), c.Key(), r.outputs)
	}
	b.Trim(env)
	// The partition's stream time goes with the write, so a restart starts
	// from it (streamtime.go); a tick records the one it was judged at.
	env.StreamMs = max(env.StreamMs, g.clock.watermark(c.Partition()), r.tick.GetStreamMs())
	if !r.cacheWrite(env) {
		c.g.SetValue(env)
	}
	r.written = true
	if r.deferredOn != 0 {
		g.deferred.Written(c.Partition(), c.Key())
	}
}

// unchanged reports whether the handler's write leaves the key's table value
// as it is: an unordered input (or a visit) that set the state to its stored
// bytes (st), or deleted an absent one, and emitted nothing and changed no
// timer. Then nothing is written (the package doc says why a redelivery
// stays correct), and the record releases the envelope as read.
func (r *record[S, PS]) unchanged(st []byte) bool {
	if !r.dirty || r.timersDirty || len(r.outputs) > 0 || r.ordered {
		return false
	}
	env := r.envelope()
	if r.deleted {
		if env.GetHasState() {
			return false
		}
	} else if !env.GetHasState() || !bytes.Equal(env.GetState(), st) {
		return false
	}
	// The state handed back is the stored one: the caches may keep it.
	r.dirty = false
	if !r.deleted {
		r.heldSt = r.st
		if sc := r.c.grp.states; sc != nil { // nil when the envelope cache keeps states
			sc.put(r.c.Partition(), r.c.Key(), env.GetState(), r.st)
		}
	}
	r.c.grp.m.unchanged.WithLabelValues(r.c.grp.name, r.c.Topic()).Inc()
	return true
}

// deferAdvance keeps the advance of this callback's input in memory instead
// of writing the key's unchanged envelope (once.Deferred), and reports
// whether it did. Only a recorded, unordered input that emitted, on a key
// with an envelope, gets here.
func (r *record[S, PS]) deferAdvance() bool {
	base := r.deferredOn
	if base == 0 {
		base = once.Print(r.envelope()) // as stored: nothing was applied to it
	}
	return r.c.grp.deferred.Add(r.c.Key(), base, r.input(), r.outputs, r.bounds())
}

// indexTimers tells the partition's due-time index (timerindex.go) what the
// callback wrote of the key's timers, and that a tick was handled. A tick
// that found nothing to fire re-reads the stored timers, so an index that
// disagreed with the store heals instead of sending that key ticks forever.
func (r *record[S, PS]) indexTimers() {
	x := r.c.grp.index
	if x == nil {
		return
	}
	p, key := r.c.Partition(), r.c.Key()
	switch {
	case r.written && r.purge:
		x.Remove(p, key)
	case r.written && r.timersDirty, r.ticked:
		x.Set(p, key, r.envelope().GetTimers())
	}
	if r.ticked {
		x.Handled(p, key)
	}
}

// release hands the key's envelope back to the envelope cache (envcache.go)
// when the store holds exactly it: commit wrote it, or the callback read it
// and changed nothing. A callback that failed half-way never gets here, so
// its envelope is read from the store next time.
func (r *record[S, PS]) release() {
	if r.releaseCached() {
		return
	}
	ec := r.c.grp.envs
	if ec == nil {
		return
	}
	p, key := r.c.Partition(), r.c.Key()
	untouched := r.env == r.loaded && r.deferredOn == 0 && !r.touched && !r.dirty && !r.timersDirty
	if r.env == nil || r.purge || !(r.written || untouched) {
		ec.forget(p, key, r.held)
		return
	}
	// The state that goes with env: the one just encoded into it, or the
	// cached one State did not hand over (env's state is unchanged then).
	var st any
	switch {
	case !r.c.grp.cacheStates:
	case r.dirty && !r.deleted:
		st = r.st
	case !r.dirty && r.heldSt != nil:
		st = r.heldSt
	}
	ec.put(p, key, r.held, r.env, st)
}
