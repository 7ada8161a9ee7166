package debounce

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/codecs/kitpb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

var (
	pingsApplied = promauto.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_pings_processed_total",
		Help: "Pings applied to device state by the debouncer.",
	})
	triggersEmitted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_triggers_total",
		Help: "Triggers emitted by the debouncer, by type and reason.",
	}, []string{"type", "reason"})
	flapsSuppressed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_flaps_suppressed_total",
		Help: "Candidate transitions abandoned before confirmation: flapping the debouncer kept from becoming triggers.",
	})
	stalePings = promauto.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_stale_pings_total",
		Help: "Pings dead-lettered as stale by the debouncer because a TIMEOUT exit already closed the device at a later time (the kit counts other stale inputs in fencestream_hlc_stale_total).",
	})
	silenceTicks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_silence_ticks_total",
		Help: "Silence ticks: sent by the sweep for a device whose timeout passed, and applied from the loop (applied ones that found the device active again change nothing).",
	}, []string{"stage"})
)

// SweepVisitor is the name of the silence-sweep visit.
const SweepVisitor = "silence-sweep"

// Group is the Goka group type of the debouncer.
type Group = group.Group[geofencepb.DeviceState, *geofencepb.DeviceState]

// Context is the handler context of the debouncer.
type Context = group.Context[geofencepb.DeviceState, *geofencepb.DeviceState]

// Opt configures the debouncer.
type Opt func(*config)

type config struct {
	defaults Settings
	log      *slog.Logger
	now      func() time.Time
}

// WithDefaults sets the debounce settings of fences that do not override them
// (default DefaultSettings()).
func WithDefaults(s Settings) Opt { return func(c *config) { c.defaults = s } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Opt { return func(c *config) { c.log = l } }

// WithClock sets the wall clock of the silence sweep (default time.Now). Event
// time never comes from it.
func WithClock(now func() time.Time) Opt { return func(c *config) { c.now = now } }

// Debouncer holds the catalogue and the group definition.
type Debouncer struct {
	cfg   config
	cat   *fences.Catalogue
	group *Group

	mu       sync.Mutex
	activity map[int32]partitionActivity

	triggers group.Out[geofencepb.Trigger, *geofencepb.Trigger]
	ticks    group.LoopOut[kitpb.Tick, *kitpb.Tick]
	sweep    group.Visit[time.Time]
}

// partitionActivity lets the sweep tell a silent device from a partition that is
// still catching up on a backlog (whose devices only look silent).
type partitionActivity struct {
	watermarkMs int64     // highest event time applied
	lastWall    time.Time // wall time of the last record applied
}

// New defines the debouncer over topo's "debouncer" declaration, reading fences
// from cat.
func New(topo *topology.Topology, cat *fences.Catalogue, opts ...Opt) (*Debouncer, error) {
	cfg := config{defaults: DefaultSettings(), log: slog.Default(), now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.defaults.Validate(); err != nil {
		return nil, err
	}
	d := &Debouncer{cfg: cfg, cat: cat, activity: map[int32]partitionActivity{}}
	g := group.New[geofencepb.DeviceState](topo, topology.GroupDebouncer, cfg.log)
	group.Stream(g, topology.TopicPings, d.handlePing, group.OrderedByHLC(PingHLC))
	d.ticks = group.Loop(g, d.handleTick)
	d.triggers = group.Output[geofencepb.DeviceState, *geofencepb.DeviceState, geofencepb.Trigger](g, topology.TopicTriggers)
	d.sweep = group.Visitor(g, SweepVisitor, d.sweepDevice)
	d.group = g
	return d, nil
}

// Group returns the group, to build its processor.
func (d *Debouncer) Group() *Group { return d.group }

func (d *Debouncer) handlePing(c *Context, p *geofencepb.Ping) error {
	if err := ValidatePing(c.Key(), p); err != nil {
		return err
	}
	// The kit ordered the ping by PingHLC; triggers carry the same value.
	p.Hlc = PingHLC(p)
	st := c.State()
	if st == nil {
		st = &geofencepb.DeviceState{DeviceId: c.Key()}
	}
	Upgrade(st)
	if p.GetHlc() <= st.GetLastHlc() {
		// A TIMEOUT exit moved the device's clock past this ping (or the state
		// predates the kit's ordering): applying it would reorder triggers.
		stalePings.Inc()
		c.DeadLetter(group.ReasonStale, fmt.Errorf("%w: device state is at %d, ping %d", group.ErrStale, st.GetLastHlc(), p.GetHlc()))
		return nil
	}
	st.Partition = c.Partition()
	out := Apply(st, p, d.cat.Snapshot(), d.cfg.defaults)
	for _, t := range out.Triggers {
		d.triggers.Emit(c, c.Key(), t)
		triggersEmitted.WithLabelValues(t.GetType().String(), t.GetReason().String()).Inc()
	}
	pingsApplied.Inc()
	flapsSuppressed.Add(float64(out.FlapsSuppressed))
	c.SetState(st)
	d.noteActivity(c.Partition(), p.GetDeviceTimeMs())
	return nil
}

func (d *Debouncer) noteActivity(p int32, eventMs int64) {
	d.mu.Lock()
	a := d.activity[p]
	a.watermarkMs = max(a.watermarkMs, eventMs)
	a.lastWall = d.cfg.now()
	d.activity[p] = a
	d.mu.Unlock()
}

// sweepNow is the "now" a silent device of partition p is judged by: the wall
// clock, held back to the partition's event-time watermark while the partition
// is busy, so replaying a backlog does not time out devices whose later pings
// are still queued.
func (d *Debouncer) sweepNow(p int32, wall time.Time, timeout time.Duration) int64 {
	d.mu.Lock()
	a, ok := d.activity[p]
	d.mu.Unlock()
	now := wall.UnixMilli()
	if !ok || wall.Sub(a.lastWall) >= timeout {
		return now // idle partition: wall clock decides
	}
	return min(now, a.watermarkMs)
}

// sweepDevice decides, on the wall clock, whether a device has been silent past
// a timeout, and if so sends it a tick through the loop. It changes nothing
// itself: the tick is applied by handleTick, where the kit records what it
// emits, so a crash between the state write and the trigger cannot lose the
// TIMEOUT exit (a visit has no input a redelivery could replay).
func (d *Debouncer) sweepDevice(c *Context, wall time.Time) {
	st := c.State()
	if st == nil {
		return
	}
	Upgrade(st)
	if len(st.FenceStates) == 0 {
		return
	}
	now := d.sweepNow(c.Partition(), wall, d.cfg.defaults.SilenceTimeout)
	if _, changed := Expire(proto.Clone(st).(*geofencepb.DeviceState), now, d.cat.Snapshot(), d.cfg.defaults); !changed {
		return
	}
	silenceTicks.WithLabelValues("sent").Inc()
	d.ticks.Send(c, c.Key(), &kitpb.Tick{NowMs: now, Name: SweepVisitor})
}

// handleTick applies a silence tick: the stays still silent at the tick's time
// are closed with TIMEOUT exits stamped in event time. The tick's time decides
// only whether the timeout passed, so replaying the loop yields the same
// triggers with the same ids.
func (d *Debouncer) handleTick(c *Context, t *kitpb.Tick) error {
	silenceTicks.WithLabelValues("applied").Inc()
	st := c.State()
	if st == nil {
		return nil
	}
	Upgrade(st)
	trigs, changed := Expire(st, t.GetNowMs(), d.cat.Snapshot(), d.cfg.defaults)
	if !changed {
		return nil // the device spoke again after the sweep looked
	}
	for _, tr := range trigs {
		d.triggers.Emit(c, c.Key(), tr)
		triggersEmitted.WithLabelValues(tr.GetType().String(), tr.GetReason().String()).Inc()
	}
	if len(trigs) > 0 {
		c.Logger().Info("silence timeout closed device", "fences", len(trigs), "last_event_ms", st.LastEventTimeMs)
	}
	c.SetState(st)
	return nil
}

// Sweep visits every device this instance owns and closes stays of silent
// devices with EXIT reason TIMEOUT. Goka has no timers, so the binary calls it
// on a ticker; tests call it with an injected clock.
func (d *Debouncer) Sweep(ctx context.Context, proc *group.Processor) error {
	if err := d.sweep.Run(ctx, proc, d.cfg.now()); err != nil {
		return fmt.Errorf("silence sweep: %w", err)
	}
	return nil
}

// RunSweeps calls Sweep every interval until ctx ends.
func (d *Debouncer) RunSweeps(ctx context.Context, proc *group.Processor, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := d.Sweep(ctx, proc); err != nil && ctx.Err() == nil {
				d.cfg.log.Warn("sweep failed; retrying next interval", "err", err)
			}
		}
	}
}
