package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
)

// TimerKind says which clock a timer waits for.
type TimerKind int32

const (
	// StreamClock timers are due when the stream time of the key's partition
	// (see EventTime) reaches them. They are the deterministic kind: a
	// partition replaying a backlog reaches them only after the records that
	// preceded them in event time.
	StreamClock = TimerKind(kitpb.TimerKind_TIMER_KIND_STREAM)
	// WallClock timers are due when the processing instance's clock reaches
	// them, whatever the data says.
	WallClock = TimerKind(kitpb.TimerKind_TIMER_KIND_WALL)
)

func (k TimerKind) String() string {
	switch k {
	case StreamClock:
		return "stream"
	case WallClock:
		return "wall"
	}
	return fmt.Sprintf("TimerKind(%d)", int32(k))
}

// Timer is a key's named timer as its handler sees it.
type Timer struct {
	Name string
	// At is when the timer was due: what a handler writes is stamped from it
	// (or from the state), never from the wall clock at firing.
	At   time.Time
	Kind TimerKind
}

// DefaultMaxTimers is how many timers a key may have at once by default.
const DefaultMaxTimers = 64

// DefaultTimerInterval is how often, by default, the processor looks for due
// timers.
const DefaultTimerInterval = time.Second

// Errors of SetTimer.
var (
	ErrTooManyTimers = errors.New("the key has the maximum number of timers")
	// ErrTimerName: SetTimer takes any name except "" and names starting
	// with "kit/", which the kit keeps for its own timers (see SetTimer).
	ErrTimerName = errors.New(`bad timer name (want a non-empty name not starting with "kit/")`)
	ErrNoTimers  = errors.New("the group has no timers")
)

// kitTimerPrefix starts the names of timers the kit sets for itself (windows,
// state TTL); handlers cannot set or receive them.
const kitTimerPrefix = "kit/"

// tickName names the kit's timer ticks (kitpb.Tick.Name).
const tickName = "kit-timers"

// DefaultTimerBatch is how many ticks, by default, may be in flight per
// partition: a look sends at most this many minus those not yet handled, and
// a partition is refilled when half have been handled. Small, because an
// input that arrives during a burst waits behind about partitions × batch ×
// a tick's cost / cores; not smaller, because smaller batches cost more CPU
// per tick (more, smaller produce requests and fetches). With 24 partitions
// on 2 cores and 196,000 timers due at once, 2,000 stalled input 4-19 s; 256
// stalled it 0.14-0.33 s at the old burst's CPU; 64 stalled it 0.13-0.72 s
// at 15-25 % more CPU (fencectl bench scale --devices 200000).
const DefaultTimerBatch = 256

// SetTimer sets (or moves) the key's timer name to fire at on the given clock.
// It is stored with the state when the handler returns, so it survives restarts
// and rebalances. A key has at most the group's MaxTimers timers.
//
// A name is any non-empty string that does not start with "kit/"; others are
// refused with ErrTimerName. A timer is found by its name (setting it again
// moves it, CancelTimer removes it, OnTimer gets it as Timer.Name), so it
// needs one. The kit names the timers of its windows, sessions, sliding
// windows, stream joins and state TTL "kit/..." and hands those to itself,
// never to OnTimer: a handler's "kit/" timer would never reach its handler,
// and could move or cancel one of the kit's.
func (c *Context[S, PS]) SetTimer(name string, at time.Time, kind TimerKind) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty, and a timer is found by its name", ErrTimerName)
	case strings.HasPrefix(name, kitTimerPrefix):
		return fmt.Errorf("%w: %q starts with %q, which the kit keeps for the timers of its windows, sessions, joins and state TTL (they never reach OnTimer)", ErrTimerName, name, kitTimerPrefix)
	}
	return c.setTimer(name, at, kind)
}

func (c *Context[S, PS]) setTimer(name string, at time.Time, kind TimerKind) error {
	if !c.grp.timers {
		return fmt.Errorf("group %s: %w: register OnTimer (and declare the timers topic)", c.grp.name, ErrNoTimers)
	}
	if kind != StreamClock && kind != WallClock {
		return fmt.Errorf("timer %q: unknown kind %v", name, kind)
	}
	env := c.mutableEnvelope()
	for _, t := range env.Timers {
		if t.GetName() == name {
			t.AtMs, t.Kind = at.UnixMilli(), kitpb.TimerKind(kind)
			c.timersDirty = true
			return nil
		}
	}
	if len(env.Timers) >= c.grp.rt.maxTimers {
		return fmt.Errorf("timer %q: %w (%d)", name, ErrTooManyTimers, c.grp.rt.maxTimers)
	}
	env.Timers = append(env.Timers, &kitpb.Timer{Name: name, AtMs: at.UnixMilli(), Kind: kitpb.TimerKind(kind)})
	c.timersDirty = true
	return nil
}

// CancelTimer removes the key's timer name, if set.
func (c *Context[S, PS]) CancelTimer(name string) {
	env := c.envelope()
	if env == nil {
		return
	}
	n := len(env.Timers)
	env.Timers = slices.DeleteFunc(env.Timers, func(t *kitpb.Timer) bool { return t.GetName() == name })
	if len(env.Timers) != n {
		c.timersDirty = true
	}
}

// TimerAt returns the key's timer name, if set.
func (c *Context[S, PS]) TimerAt(name string) (Timer, bool) {
	for _, t := range c.envelope().GetTimers() {
		if t.GetName() == name {
			return timerOf(t), true
		}
	}
	return Timer{}, false
}

func timerOf(t *kitpb.Timer) Timer {
	return Timer{Name: t.GetName(), At: time.UnixMilli(t.GetAtMs()), Kind: TimerKind(t.GetKind())}
}

// mutableEnvelope returns the key's envelope, creating an empty one to be
// stored at commit.
func (c *Context[S, PS]) mutableEnvelope() *kitpb.Envelope {
	if c.envelope() == nil {
		c.env = &kitpb.Envelope{}
	}
	return c.env
}

// OnTimer registers the handler of the group's timers. Timers of a key fire
// one after the other in order of their due time (then name), each in a normal
// record callback on the group's timer topic: the timer's removal, the state
// the handler sets and what it emits are stored together and a redelivery
// re-emits instead of firing again — the same guarantee as any input.
//
// How they fire: the processor keeps, per partition, an index of its keys'
// timers by due time, and looks every TimerInterval (wall clock) at the top of
// it; for a key with due timers it sends a kitpb.Tick carrying the partition's
// stream time and the wall clock to <group>-timers under the key (at most
// TimerBatch ticks in flight per partition; the next batch goes out as soon as
// half of them are handled). The tick, not the look, decides
// what fires, so a replay fires the same timers. Stream-time timers fire on the
// stream time of the key's partition when the tick was sent: the highest event
// time the instance has applied there (see EventTime), or the wall clock once
// the partition has been idle for IdleStreamTime. An error from handle is
// logged and counted; the timer is consumed.
//
// The group's declaration must name its timer topic (topology.Processor.Timers).
func OnTimer[S any, PS codecs.Message[S]](g *Group[S, PS], handle func(c *Context[S, PS], t Timer) error) {
	g.useTimers()
	g.onTimer = handle
}

// onKitTimer routes the kit's own timer kitTimerPrefix+name to handle.
func (g *Group[S, PS]) onKitTimer(name string, handle func(c *Context[S, PS], t Timer) error) {
	g.useTimers()
	if g.kitTimers == nil {
		g.kitTimers = map[string]func(*Context[S, PS], Timer) error{}
	}
	g.kitTimers[kitTimerPrefix+name] = handle
}

// useTimers adds the timer edges once: the timer topic as an input (ticks run
// as records). The ticks are sent by the processor's timer driver.
func (g *Group[S, PS]) useTimers() {
	if g.timers {
		return
	}
	g.timers = true
	topic := g.decl.Timers
	if topic == "" {
		g.err = errors.Join(g.err, fmt.Errorf("group %s uses timers but its declaration names no timer topic: declare topology.TimersTopic(%q, ...) and set Timers: %q", g.name, g.name, topology.TimersTopicName(g.name)))
		return
	}
	g.edges = append(g.edges, func(in *instance[S, PS]) goka.Edge {
		return goka.Input(goka.Stream(topic), codecs.For[kitpb.Tick](), wrap(in, g.fireDue, streamConfig[kitpb.Tick, *kitpb.Tick]{}))
	})
}

func isDue(t *kitpb.Timer, streamMs, wallMs int64) bool {
	switch t.GetKind() {
	case kitpb.TimerKind_TIMER_KIND_STREAM:
		return t.GetAtMs() <= streamMs
	case kitpb.TimerKind_TIMER_KIND_WALL:
		return t.GetAtMs() <= wallMs
	}
	return false
}

// fireDue is the handler of a tick: the key's timers due by the tick's bounds
// fire, oldest first. Timers their handlers set meanwhile wait for the next
// tick, so a handler that re-arms itself cannot loop.
func (g *Group[S, PS]) fireDue(c *Context[S, PS], tick *kitpb.Tick) error {
	c.ticked = true // the index learns the tick was handled (indexTimers)
	env := c.envelope()
	var due []*kitpb.Timer
	for _, t := range env.GetTimers() {
		if isDue(t, tick.GetStreamMs(), tick.GetWallMs()) {
			due = append(due, t)
		}
	}
	if len(due) == 0 {
		return nil // fired already, cancelled or moved since the tick was sent
	}
	slices.SortFunc(due, func(a, b *kitpb.Timer) int {
		return cmp.Or(cmp.Compare(a.GetAtMs(), b.GetAtMs()), strings.Compare(a.GetName(), b.GetName()))
	})
	c.tick = tick
	defer func() { c.tick, c.eventTime = nil, time.Time{} }()
	for _, t := range due {
		// Removed before the handler runs, so the handler may set it again.
		env.Timers = slices.DeleteFunc(env.Timers, func(x *kitpb.Timer) bool { return x.GetName() == t.GetName() })
		c.timersDirty = true
		tm := timerOf(t)
		c.eventTime = tm.At
		handle := g.onTimer
		if strings.HasPrefix(tm.Name, kitTimerPrefix) {
			// By the exact name: window sets "hour" and "hourly" of one
			// group each get their own timer.
			handle = g.kitTimers[tm.Name]
		}
		if handle == nil {
			c.Logger().Warn("timer has no handler; dropped", "timer", tm.Name)
			continue
		}
		c.grp.m.timersFired.WithLabelValues(g.name, tm.Kind.String()).Inc()
		if err := callTimer(c, handle, tm); err != nil {
			c.grp.m.timerErrors.WithLabelValues(g.name).Inc()
			c.Logger().Error("timer handler failed; the timer is consumed", "timer", tm.Name, "at", tm.At.UTC(), "err", err)
		}
	}
	return nil
}

func resendAfter(every time.Duration) time.Duration { return max(10*every, 10*time.Second) }

// timerDriver runs the looks for due timers of a processor.
type timerDriver struct {
	name      string
	every     time.Duration
	batch     int
	now       func() time.Time
	streamNow func(partition int32, wall time.Time) int64
	idx       *timerIndex
	auto      bool // run by itself (not under Tester, where tests call FireTimers)
	log       *slog.Logger

	mu         sync.Mutex
	emitter    *goka.Emitter // the ticks' producer; nil while not running
	newEmitter func() (*goka.Emitter, error)
}

// start builds the ticks' producer.
func (d *timerDriver) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.emitter != nil {
		return nil
	}
	em, err := d.newEmitter()
	if err != nil {
		return fmt.Errorf("group %s: building the timer ticks' producer: %w", d.name, err)
	}
	d.emitter = em
	return nil
}

// stop flushes and closes the ticks' producer.
func (d *timerDriver) stop() {
	d.mu.Lock()
	em := d.emitter
	d.emitter = nil
	d.mu.Unlock()
	if em != nil {
		if err := em.Finish(); err != nil {
			d.log.Warn("closing the timer ticks' producer", "err", err)
		}
	}
}

// TimerStats counts the processor's looks for due timers since it was built.
type TimerStats struct {
	Looks int64
	// KeysRead is how many keys the looks examined: keys with due timers
	// (and keys whose tick was lost and is sent again). A look at keys whose
	// timers are not due reads none.
	KeysRead int64
	// Refills is how many early looks the processor made at partitions whose
	// in-flight ticks fell to half the batch while due keys were left (not
	// counted in Looks; their keys and ticks are in KeysRead and TicksSent).
	Refills int64
	// TicksSent is how many ticks the looks sent.
	TicksSent int64
	// Rebuilds is how many times a partition's index was built from its
	// local store (once per partition assigned or recovered).
	Rebuilds int64
	// Indexed is how many keys with timers the index holds now.
	Indexed int
}

// TimerStats returns the counters of the processor's looks for due timers.
func (p *Processor) TimerStats() TimerStats {
	if p.timers == nil {
		return TimerStats{}
	}
	x := p.timers.idx
	st := TimerStats{Looks: x.looks.Load(), Refills: x.refills.Load(), KeysRead: x.keysRead.Load(), TicksSent: x.ticksSent.Load(), Rebuilds: x.rebuilt.Load()}
	for _, pt := range x.partitions() {
		st.Indexed += pt.size()
	}
	return st
}

// FireTimers looks once at the due-time index of every partition this
// instance processes and sends a tick for each key with due timers (the
// processor does this every TimerInterval by itself, except under Tester,
// where tests call it). It reads no table value: its cost is the number of
// due keys, at most TimerBatch ticks in flight per partition. The ticks are
// handled asynchronously, as records; when a partition's in-flight ticks fall
// to half the batch with due keys left, the running processor sends it the
// next batch at once (a refill) rather than at the next look.
func (p *Processor) FireTimers(ctx context.Context) error {
	return p.look(ctx, false)
}

// look sends ticks for the due keys of every installed partition, or, for a
// refill, of those whose refill flag is set.
func (p *Processor) look(ctx context.Context, refill bool) error {
	d := p.timers
	if d == nil {
		return fmt.Errorf("group %s: %w", p.name, ErrNoTimers)
	}
	d.mu.Lock()
	em := d.emitter
	d.mu.Unlock()
	if em == nil {
		return fmt.Errorf("group %s: firing timers: the processor is not running", p.name)
	}
	wall := d.now()
	wallMs := wall.UnixMilli()
	sentMs := max(wallMs, 1) // 0 means "no tick in flight"
	resendBefore := wallMs - resendAfter(d.every).Milliseconds()
	if refill {
		d.idx.refills.Add(1)
	} else {
		d.idx.looks.Add(1)
	}
	for part, pt := range d.idx.partitions() {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A look serves any refill asked for meanwhile.
		if asked := pt.refill.Swap(false); refill && !asked {
			continue
		}
		if pt.size() == 0 {
			continue
		}
		streamMs := d.streamNow(part, wall)
		keys, read := pt.due(streamMs, wallMs, sentMs, resendBefore, d.batch, refill)
		d.idx.keysRead.Add(int64(read))
		if len(keys) == 0 {
			continue
		}
		// Sent outside the index's lock: under Tester, a send handles the
		// tick before it returns.
		tick := &kitpb.Tick{Name: tickName, NowMs: wallMs, StreamMs: streamMs, WallMs: wallMs}
		for _, key := range keys {
			prom, err := em.Emit(key, tick)
			if err != nil {
				d.log.Error("encoding timer tick", "err", err)
				continue // the key's tick counts as lost and is sent again
			}
			prom.Then(func(err error) {
				if err != nil {
					d.log.Warn("sending timer tick failed; it is sent again later", "key", key, "err", err)
				}
			})
		}
		d.idx.ticksSent.Add(int64(len(keys)))
		p.m.timerTicks.WithLabelValues(p.name).Add(float64(len(keys)))
	}
	// Under Tester a send handles its tick before it returns, so the refills
	// asked for meanwhile are served here, and one call fires every due timer,
	// as the running processor soon would. It ends: a refill sends no key
	// twice between looks.
	for !d.auto && !refill && d.idx.refillAsked() {
		if err := p.look(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// driveTimers calls FireTimers every interval, and refills partitions as
// their ticks are handled (timerIndex.handled), until stop is closed. A look
// reads only the index, never Goka's partitions, so it needs no pause during
// rebalances: a partition that is not (yet) processing here has no index.
// With nothing due, no tick is handled and nothing wakes it between looks.
func (p *Processor) driveTimers(stop <-chan struct{}) {
	t := time.NewTicker(p.timers.every)
	defer t.Stop()
	var logs LogLimit // a broker outage fails every look: one line per 10 s
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if err := p.FireTimers(context.Background()); err != nil {
				if ok, held := logs.Allow(time.Now()); ok {
					p.log.Warn("looking for due timers failed; retrying next interval", "err", err, "similar_since_last", held)
				}
			}
		case <-p.timers.idx.wake:
			if err := p.look(context.Background(), true); err != nil {
				if ok, held := logs.Allow(time.Now()); ok {
					p.log.Warn("refilling due timers failed; the next look retries", "err", err, "similar_since_last", held)
				}
			}
		}
	}
}
