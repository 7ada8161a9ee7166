package debounce

import (
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/topology"
)

// metrics are the debouncer's, registered on Registerer's registry.
type metrics struct {
	pingsApplied, flapsSuppressed, stalePings, silenceTimers prometheus.Counter
	triggersEmitted                                          *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (m metrics, err error) {
	counter := func(name, help string) prometheus.Counter {
		c, e := collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
		err = errors.Join(err, e)
		return c
	}
	m.pingsApplied = counter("fencestream_pings_processed_total", "Pings applied to device state by the debouncer.")
	m.flapsSuppressed = counter("fencestream_flaps_suppressed_total", "Candidate transitions abandoned before confirmation: flapping the debouncer kept from becoming triggers.")
	m.stalePings = counter("fencestream_stale_pings_total", "Pings the debouncer dead-lettered as stale (reason stale): an HLC below the device's last applied one, or behind the time a TIMEOUT exit already closed the device at. The kit's fencestream_hlc_stale_total{kind=\"stale\"} counts the first kind alone.")
	m.silenceTimers = counter("fencestream_silence_timers_fired_total", "Silence timers fired (a device's last fix plus its silence timeout reached in stream time); those that closed stays emitted TIMEOUT exits.")
	var e error
	m.triggersEmitted, e = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_triggers_total",
		Help: "Triggers emitted by the debouncer, by type and reason.",
	}, []string{"type", "reason"}))
	return m, errors.Join(err, e)
}

// envelopeCacheBytes bounds the debouncer's cache of decoded table values
// (envelopes with their states) by their encodings: a device with a silence
// timer has a ~125-byte envelope, so about 130,000 devices (decoded, a few
// times that in heap).
const envelopeCacheBytes = 16 << 20

// SilenceTimer is the name of a device's silence timer: due in stream time at
// its last fix plus the shortest silence timeout among its fences.
const SilenceTimer = "silence"

// Group is the Goka group type of the debouncer.
type Group = group.Group[geofencepb.DeviceState, *geofencepb.DeviceState]

// Context is the handler context of the debouncer.
type Context = group.Context[geofencepb.DeviceState, *geofencepb.DeviceState]

// Opt configures the debouncer.
type Opt func(*config)

type config struct {
	defaults     Settings
	log          *slog.Logger
	now          func() time.Time
	maxAccuracyM float64
	registerer   prometheus.Registerer
	fences       *fences.Shared // Module and Run only
}

// defaultConfig is every default of the debouncer's options, in one place.
func defaultConfig() config {
	return config{defaults: DefaultSettings(), log: slog.Default(), now: time.Now, maxAccuracyM: DefaultMaxAccuracyM, registerer: prometheus.DefaultRegisterer}
}

// Fences makes Module and Run take the fence catalogue from s (shared
// with the binary's other modules) instead of following the fences topic
// themselves (default: a catalogue of their own). New ignores it.
func Fences(s *fences.Shared) Opt { return func(c *config) { c.fences = s } }

// MaxAccuracy sets the largest accuracy radius (metres) a ping may state;
// a vaguer one is dead-lettered as implausible (default DefaultMaxAccuracyM).
func MaxAccuracy(m float64) Opt { return func(c *config) { c.maxAccuracyM = m } }

// Defaults sets the debounce settings of fences that do not override them
// (default DefaultSettings()).
func Defaults(s Settings) Opt { return func(c *config) { c.defaults = s } }

// Registerer sets where the debouncer's metrics are registered (default
// prometheus.DefaultRegisterer); Module and Run use the binary's.
func Registerer(reg prometheus.Registerer) Opt { return func(c *config) { c.registerer = reg } }

// Logger sets the logger (default slog.Default(); nil keeps it).
func Logger(l *slog.Logger) Opt {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// Now sets the wall clock of the debouncer's processor (default
// time.Now): when an idle partition's silent devices time out, and the
// future-HLC check. Event time never comes from it.
func Now(now func() time.Time) Opt { return func(c *config) { c.now = now } }

// validate refuses options that cannot work, naming each.
func (c *config) validate() error {
	var errs []error
	if err := c.defaults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Defaults: %w", err))
	}
	if !finite(c.maxAccuracyM) || c.maxAccuracyM <= 0 {
		errs = append(errs, fmt.Errorf("MaxAccuracy: %v m, must be positive and finite", c.maxAccuracyM))
	}
	if c.now == nil {
		errs = append(errs, errors.New("Now: nil clock"))
	}
	if c.registerer == nil {
		errs = append(errs, errors.New("Registerer: nil registerer"))
	}
	return errors.Join(errs...)
}

// Debouncer holds the catalogue and the group definition.
type Debouncer struct {
	cfg      config
	cat      *fences.Catalogue
	group    *Group
	triggers group.Out[geofencepb.Trigger, *geofencepb.Trigger]
	m        metrics
}

// New defines the debouncer over topo's "debouncer" declaration, reading fences
// from cat.
func New(topo *topology.Topology, cat *fences.Catalogue, opts ...Opt) (*Debouncer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("debounce: %w", err)
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("debounce: metrics: %w", err)
	}
	d := &Debouncer{cfg: cfg, cat: cat, m: m}
	g := group.New[geofencepb.DeviceState](topo, geofence.GroupDebouncer, cfg.log,
		// A device's next ping finds its envelope and state decoded, as its
		// last ping left them: no store read and no decode per ping while it
		// is cached. handlePing and handleSilence never keep a state past
		// their callback.
		group.CacheEnvelopes(envelopeCacheBytes),
		group.CacheStates(envelopeCacheBytes), // kept in the envelopes' entries, under their budget
		// Stale pings are dead-lettered by the kit (ordered by HLC) before
		// handlePing sees them, and by handlePing after a TIMEOUT exit:
		// counted here, once each, whichever refused them.
		group.OnDeadLetter(func(topic, reason string) {
			if topic == geofence.TopicPings && reason == deadletter.ReasonStale {
				m.stalePings.Inc()
			}
		}))
	group.Stream(g, geofence.TopicPings, d.handlePing, group.OrderedByHLC(PingHLC), group.EventTime(pingTime))
	d.triggers = group.Output[geofencepb.Trigger](g, geofence.TopicTriggers)
	group.OnTimer(g, d.handleSilence)
	d.group = g
	return d, nil
}

// Group returns the group, to build its processor.
func (d *Debouncer) Group() *Group { return d.group }

// ProcessorOpts are the kit options the debouncer's processor needs besides
// the caller's: a partition whose pings stopped for the silence timeout has
// its stream time follow the wall clock, so its silent devices still time out
// (stream time moves only with data otherwise).
func (d *Debouncer) ProcessorOpts() []group.Opt {
	return []group.Opt{group.IdleStreamTime(d.cfg.defaults.SilenceTimeout), group.Now(d.cfg.now)}
}

func pingTime(p *geofencepb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }

func (d *Debouncer) handlePing(c *Context, p *geofencepb.Ping) error {
	if err := ValidatePing(c.Key(), p); err != nil {
		return err
	}
	if err := CheckPlausible(p, d.cfg.maxAccuracyM); err != nil {
		c.DeadLetter(ReasonImplausible, err)
		return nil
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
		c.DeadLetter(deadletter.ReasonStale, fmt.Errorf("%w: device state is at %d, ping %d", group.ErrStale, st.GetLastHlc(), p.GetHlc()))
		return nil
	}
	st.Partition = c.Partition()
	out := Apply(st, p, d.cat.Snapshot(), d.cfg.defaults)
	for _, t := range out.Triggers {
		d.triggers.Emit(c, c.Key(), t)
		d.m.triggersEmitted.WithLabelValues(t.GetType().String(), t.GetReason().String()).Inc()
	}
	d.m.pingsApplied.Inc()
	d.m.flapsSuppressed.Add(float64(out.FlapsSuppressed))
	c.SetState(st)
	return d.armSilence(c, st, st.GetLastEventTimeMs())
}

// armSilence sets the device's silence timer at its last fix plus the shortest
// silence timeout among the fences it has a state for that ends after afterMs,
// or cancels it when there is none. The bound keeps a timer from being armed
// again at the time it just fired.
func (d *Debouncer) armSilence(c *Context, st *geofencepb.DeviceState, afterMs int64) error {
	snap := d.cat.Snapshot()
	last := time.UnixMilli(st.GetLastEventTimeMs())
	var timeout time.Duration
	for _, e := range st.FenceStates {
		cfg := d.cfg.defaults
		if f, ok := snap.Get(e.FenceId); ok {
			cfg = Resolved(d.cfg.defaults, &f)
		}
		if cfg.SilenceTimeout > 0 && last.Add(cfg.SilenceTimeout).UnixMilli() > afterMs && (timeout == 0 || cfg.SilenceTimeout < timeout) {
			timeout = cfg.SilenceTimeout
		}
	}
	if timeout == 0 {
		c.CancelTimer(SilenceTimer)
		return nil
	}
	return c.SetTimer(SilenceTimer, last.Add(timeout), group.StreamClock)
}

// handleSilence fires when stream time passes the device's last fix plus a
// silence timeout: stays still silent at the timer's due time are closed with
// TIMEOUT exits stamped in event time (last fix + timeout), and the timer is
// armed again for fences with longer timeouts. It runs as a record (the kit's
// timer tick), so what it emits is recorded with the state and a redelivery
// re-emits it, and it reads only the timer's due time, so a replay yields the
// same triggers with the same ids.
func (d *Debouncer) handleSilence(c *Context, t group.Timer) error {
	if t.Name != SilenceTimer {
		return fmt.Errorf("unknown timer %q", t.Name)
	}
	d.m.silenceTimers.Inc()
	st := c.State()
	if st == nil {
		return nil
	}
	Upgrade(st)
	trigs, changed := Expire(st, t.At.UnixMilli(), d.cat.Snapshot(), d.cfg.defaults)
	if !changed {
		return d.armSilence(c, st, t.At.UnixMilli()) // e.g. the catalogue changed a timeout
	}
	for _, tr := range trigs {
		d.triggers.Emit(c, c.Key(), tr)
		d.m.triggersEmitted.WithLabelValues(tr.GetType().String(), tr.GetReason().String()).Inc()
	}
	if len(trigs) > 0 {
		c.Logger().Info("silence timeout closed device", "fences", len(trigs), "last_event_ms", st.LastEventTimeMs)
	}
	c.SetState(st)
	return d.armSilence(c, st, t.At.UnixMilli())
}
