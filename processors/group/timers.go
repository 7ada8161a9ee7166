package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/kitpb"
	"github.com/fencestream/fencestream/topology"
)

var (
	timersFired = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_timers_fired_total",
		Help: "Timers fired, by clock (stream or wall).",
	}, []string{"group", "kind"})
	timerErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_timer_errors_total",
		Help: "Timer handlers that returned an error (the timer is consumed; the error is logged).",
	}, []string{"group"})
	timerTicks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_timer_ticks_sent_total",
		Help: "Ticks sent to a group's timer topic for keys with due timers.",
	}, []string{"group"})
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
	ErrTimerName     = errors.New("bad timer name")
	ErrNoTimers      = errors.New("the group has no timers")
)

// kitTimerPrefix starts the names of timers the kit sets for itself (windows,
// state TTL); handlers cannot set or receive them.
const kitTimerPrefix = "kit/"

// timerVisitor is the Goka visitor that looks for due timers.
const timerVisitor = "kit-timers"

// SetTimer sets (or moves) the key's timer name to fire at on the given clock.
// It is stored with the state when the handler returns, so it survives restarts
// and rebalances. A key has at most the group's MaxTimers timers.
func (c *Context[S, PS]) SetTimer(name string, at time.Time, kind TimerKind) error {
	if name == "" || strings.HasPrefix(name, kitTimerPrefix) {
		return fmt.Errorf("%w: %q (empty, or the kit's %q prefix)", ErrTimerName, name, kitTimerPrefix)
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
// How they fire: the processor looks every TimerInterval (wall clock) at the
// keys of its partitions (a Goka visit) and, for a key with due timers, sends
// a kitpb.Tick carrying the partition's stream time and the wall clock to
// <group>-timers under the key. The tick, not the look, decides what fires, so
// a replay fires the same timers. Stream-time timers fire on the stream time
// of the key's partition when the tick was sent: the highest event time the
// instance has applied there (see EventTime), or the wall clock once the
// partition has been idle for IdleStreamTime. An error from handle is logged
// and counted; the timer is consumed.
//
// The group's declaration must name its timer topic (topology.Processor.Timers).
func OnTimer[S any, PS codecs.Message[S]](g *Group[S, PS], handle func(c *Context[S, PS], t Timer) error) {
	g.useTimers()
	g.onTimer = handle
}

// onKitTimer routes the kit's own timers whose name starts with prefix.
func (g *Group[S, PS]) onKitTimer(prefix string, handle func(c *Context[S, PS], t Timer) error) {
	g.useTimers()
	if g.kitTimers == nil {
		g.kitTimers = map[string]func(*Context[S, PS], Timer) error{}
	}
	g.kitTimers[kitTimerPrefix+prefix] = handle
}

// useTimers adds the timer edges once: the timer topic as an input (ticks run
// as records) and as an output (the visit sends them), and the visit.
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
	g.edges = append(g.edges,
		goka.Input(goka.Stream(topic), codecs.For[kitpb.Tick](), wrap(g, g.fireDue, nil)),
		goka.Output(goka.Stream(topic), codecs.For[kitpb.Tick]()),
		goka.Visitor(timerVisitor, g.visitTimers),
	)
}

// visitTimers sends a tick for the key if any of its timers is due. It changes
// nothing: the tick does the work where the kit records it.
func (g *Group[S, PS]) visitTimers(gctx goka.Context, meta any) {
	wallMs, _ := meta.(int64)
	env, _ := gctx.Value().(*kitpb.Envelope)
	if len(env.GetTimers()) == 0 {
		return
	}
	wall := time.UnixMilli(wallMs)
	streamMs := g.clock.now(gctx.Partition(), wall)
	due := false
	for _, t := range env.GetTimers() {
		due = due || isDue(t, streamMs, wallMs)
	}
	if !due || !g.pending.send(gctx.Key(), wall, g.rt.timerEvery) {
		return
	}
	tick, err := marshalOpts.Marshal(&kitpb.Tick{Name: timerVisitor, NowMs: wallMs, StreamMs: streamMs, WallMs: wallMs})
	if err != nil {
		g.log.Error("encoding timer tick", "err", err)
		return
	}
	timerTicks.WithLabelValues(g.name).Inc()
	gctx.Emit(goka.Stream(g.decl.Timers), gctx.Key(), tick)
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
	g.pending.done(c.Key())
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
			handle = nil
			for prefix, h := range g.kitTimers {
				if strings.HasPrefix(tm.Name, prefix) {
					handle = h
				}
			}
		}
		if handle == nil {
			c.Logger().Warn("timer has no handler; dropped", "timer", tm.Name)
			continue
		}
		timersFired.WithLabelValues(g.name, tm.Kind.String()).Inc()
		if err := handle(c, tm); err != nil {
			timerErrors.WithLabelValues(g.name).Inc()
			c.Logger().Error("timer handler failed; the timer is consumed", "timer", tm.Name, "at", tm.At.UTC(), "err", err)
		}
	}
	return nil
}

// pendingTicks remembers the keys a tick was sent for and not yet handled, so
// a slow partition is not sent one tick per look. An entry older than the
// resend time is sent again (the tick may have gone to a previous owner of
// the partition).
type pendingTicks struct {
	mu   sync.Mutex
	sent map[string]time.Time
}

func (p *pendingTicks) send(key string, wall time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent == nil {
		p.sent = map[string]time.Time{}
	}
	if at, ok := p.sent[key]; ok && wall.Sub(at) < resendAfter(every) && !wall.Before(at) {
		return false
	}
	p.sent[key] = wall
	return true
}

func (p *pendingTicks) done(key string) {
	p.mu.Lock()
	delete(p.sent, key)
	p.mu.Unlock()
}

// prune forgets ticks too old to wait for, keeping the map bounded by the
// keys with due timers.
func (p *pendingTicks) prune(wall time.Time, every time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, at := range p.sent {
		if wall.Sub(at) >= resendAfter(every) {
			delete(p.sent, k)
		}
	}
}

func resendAfter(every time.Duration) time.Duration { return max(10*every, 10*time.Second) }

// timerDriver runs the looks for due timers of a processor.
type timerDriver struct {
	every   time.Duration
	now     func() time.Time
	pending *pendingTicks
	auto    bool // run by itself (not under Tester, where tests call FireTimers)
	guard   *visitGuard
}

// FireTimers looks once at every key of the partitions this instance owns and
// sends a tick for each key with due timers (the processor does this every
// TimerInterval by itself, except under Tester, where tests call it). The
// ticks are handled asynchronously, as records.
func (p *Processor) FireTimers(ctx context.Context) error {
	if p.timers == nil {
		return fmt.Errorf("group %s: %w", p.name, ErrNoTimers)
	}
	wall := p.timers.now()
	p.timers.pending.prune(wall, p.timers.every)
	if err := p.gp().VisitAll(ctx, timerVisitor, wall.UnixMilli()); err != nil {
		return fmt.Errorf("group %s: firing timers: %w", p.name, err)
	}
	return nil
}

// driveTimers calls FireTimers every interval until stop is closed, skipping
// ticks while the processor is not running all its partitions or a rebalance
// is under way. It does not block on Goka's WaitForReady, which can hang after
// a start-up rebalance. A look in progress runs with visitCtx, which outlives
// stop (see Processor.Run).
func (p *Processor) driveTimers(stop <-chan struct{}, visitCtx context.Context) {
	t := time.NewTicker(p.timers.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			// Only while every partition runs: a look at partitions still
			// recovering would wait on them, and a rebalance meanwhile would
			// abort it (see visitGuard).
			if !p.gp().Recovered() || !p.timers.guard.enter() {
				continue // look at the next tick
			}
			err := p.FireTimers(visitCtx)
			p.timers.guard.leave()
			if err != nil && visitCtx.Err() == nil {
				p.log.Warn("looking for due timers failed; retrying next interval", "err", err)
			}
		}
	}
}

// MaxTimers sets how many timers one key may have at once (default
// DefaultMaxTimers); SetTimer beyond it fails with ErrTooManyTimers. Timers
// live in the key's table value, so the bound bounds the value.
func MaxTimers(n int) Opt { return func(c *runConfig) { c.maxTimers = n } }

// TimerInterval sets how often the processor looks for due timers (default
// DefaultTimerInterval). Each look visits every key of the instance's
// partitions, so a group with many keys and coarse timers (minutes) should look
// less often; a timer fires up to one interval late.
func TimerInterval(d time.Duration) Opt { return func(c *runConfig) { c.timerEvery = d } }

// IdleStreamTime makes a partition that has processed no record for d of wall
// clock time have its stream time advanced to the wall clock (default: never;
// stream time moves only with data, so stream-time timers of a partition whose
// input stopped never fire). Use it when silence itself is the event, as in
// the debouncer's TIMEOUT exits; choose d no shorter than the timeouts, so a
// partition that is merely between records is not taken for idle.
func IdleStreamTime(d time.Duration) Opt { return func(c *runConfig) { c.idle = d } }
