package occupancy

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// metrics are occupancy's, registered on WithRegisterer's registry.
type metrics struct {
	// seenBy are triggers' counters by Result, looked up once (which also
	// exports zeros) rather than by label on every trigger.
	seenBy [len(resultNames)]prometheus.Counter
	seen   *prometheus.CounterVec
	splits prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	seen, err1 := group.RegisterCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_occupancy_triggers_total",
		Help: "Triggers the occupancy processor took from its fence-keyed loop, by result: applied, duplicate (the member's last trigger again), stale (overtaken by a later trigger), expired (older than the record's horizon for a device it no longer holds), forward (sent on to a salted part of a split fence) or invalid (dead-lettered).",
	}, []string{"result"}))
	splits, err2 := group.RegisterCollector(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_occupancy_splits_total",
		Help: "Occupancy records split into salted parts because they were full (each decision is also recorded on the hot-keys topic).",
	}))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	m := &metrics{seen: seen, splits: splits}
	for r := range m.seenBy {
		m.seenBy[r] = seen.WithLabelValues(Result(r).String())
	}
	return m, nil
}

// count counts a trigger's result.
func (m *metrics) count(r Result) {
	if r >= 0 && int(r) < len(m.seenBy) {
		m.seenBy[r].Inc()
		return
	}
	m.seen.WithLabelValues(r.String()).Inc()
}

// Group is the Goka group type of the occupancy processor.
type Group = group.Group[geofencepb.Occupancy, *geofencepb.Occupancy]

// Context is the handler context of the occupancy processor.
type Context = group.Context[geofencepb.Occupancy, *geofencepb.Occupancy]

// Opt configures the occupancy processor.
type Opt func(*config)

type config struct {
	limits Limits
	log    *slog.Logger
	cat    *fences.Catalogue
	// Module and Run only (module.go).
	fences     *fences.Shared
	lagEvery   time.Duration
	registerer prometheus.Registerer
}

// defaultConfig is every default of occupancy's options, in one place.
func defaultConfig() config {
	return config{limits: Limits{}.withDefaults(), log: slog.Default(), lagEvery: DefaultLagInterval, registerer: prometheus.DefaultRegisterer}
}

// ReasonUnknownFence is the dead-letter reason of a trigger for a fence the
// catalogue has never held.
const ReasonUnknownFence = "unknown-fence"

// stateCacheBytes bounds the encoded records whose decoded form the group
// keeps (group.CacheStates): 16 MB, about 2,700 records of 6 KB.
const stateCacheBytes = 16 << 20

// WithCatalogue checks every trigger's fence against cat (default: none, every
// fence is accepted): a trigger for a fence the catalogue has never held —
// current or deleted — is dead-lettered with reason unknown-fence instead of
// creating occupancy for it. A trigger stamped with a catalogue version the
// catalogue has not reached yet is accepted: the fence may be that new.
func WithCatalogue(cat *fences.Catalogue) Opt { return func(c *config) { c.cat = cat } }

// WithDevicesCap bounds the devices listed per record (default
// DefaultDevicesCap). Counts are exact whatever the cap.
func WithDevicesCap(n int) Opt { return func(c *config) { c.limits.DevicesCap = n } }

// WithHorizon sets how long, in the triggers' HLC time, a record remembers a
// device that left (default DefaultHorizon); see the package documentation
// for what a trigger later than that does.
func WithHorizon(d time.Duration) Opt { return func(c *config) { c.limits.Horizon = d } }

// WithMaxMembers sets how many devices one record holds before it is split
// (default DefaultMaxMembers). New refuses a value whose worst-case record
// exceeds MaxRecordBytes.
func WithMaxMembers(n int) Opt { return func(c *config) { c.limits.MaxMembers = n } }

// WithRegisterer sets where occupancy's metrics are registered (default
// prometheus.DefaultRegisterer); Module and Run use the binary's.
func WithRegisterer(reg prometheus.Registerer) Opt { return func(c *config) { c.registerer = reg } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Opt { return func(c *config) { c.log = l } }

func (c *config) validate() error {
	switch {
	case c.limits.DevicesCap <= 0:
		return fmt.Errorf("occupancy: devices cap must be positive, got %d", c.limits.DevicesCap)
	case c.limits.Horizon <= 0:
		return fmt.Errorf("occupancy: horizon must be positive, got %v", c.limits.Horizon)
	case c.limits.MaxMembers <= 0:
		return fmt.Errorf("occupancy: max members must be positive, got %d", c.limits.MaxMembers)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c.limits.Validate()
}

// New defines the occupancy group over topo's "occupancy" declaration:
// fence-triggers (key device_id) are validated and looped back keyed by
// fence_id, across the topology's declared ordering boundary; the loop handler
// applies them to the fence's Occupancy in occupancy-table. Invalid triggers go
// to the dead-letter topic. Build the processor with Group.Processor.
func New(topo *topology.Topology, opts ...Opt) (*Group, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, ok := topo.Boundary(geofence.GroupOccupancy, geofence.TopicTriggers, geofence.TopicOccupancyLoop); !ok {
		return nil, fmt.Errorf("occupancy: topology %s does not declare the ordering boundary %s -> %s", topo.Name, geofence.TopicTriggers, geofence.TopicOccupancyLoop)
	}
	g := group.New[geofencepb.Occupancy](topo, geofence.GroupOccupancy, cfg.log)
	// An applying hop finds the record it wrote last time decoded (decoding
	// it again was ~6 % of the bench's CPU). Handlers here never keep a
	// record past their callback.
	group.CacheStates(g, stateCacheBytes)
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("occupancy: metrics: %w", err)
	}
	out := &outputs{m: m}
	group.Stream(g, geofence.TopicTriggers, func(c *Context, t *geofencepb.Trigger) error { return out.handleTrigger(c, t, cfg.cat) })
	out.hotKeys = group.Output[kitpb.HotKey](g, topology.TopicHotKeys)
	out.byFence = group.Loop(g, func(c *Context, t *geofencepb.Trigger) error { return out.handleLooped(c, t, cfg.limits) })
	return g, nil
}

// outputs are one group's typed outputs, its fence-keyed loop and the
// hot-keys topic: handles belong to the group that declared them, so each
// group built keeps its own.
type outputs struct {
	byFence group.LoopOut[geofencepb.Trigger, *geofencepb.Trigger]
	hotKeys group.Out[kitpb.HotKey, *kitpb.HotKey]
	m       *metrics
}

// handleTrigger re-keys a device-keyed trigger by its fence: the boundary.
func (out *outputs) handleTrigger(c *Context, t *geofencepb.Trigger, cat *fences.Catalogue) error {
	if err := validate(t); err != nil {
		out.m.count(Invalid)
		return err
	}
	if err := checkAuthentic(c.Key(), true, t); err != nil {
		out.m.count(Invalid)
		c.DeadLetter(ReasonForged, err)
		return nil
	}
	if cat != nil && !cat.EverHeld(t.GetFenceId()) && t.GetCatalogueVersion() <= cat.Version() {
		out.m.count(Invalid)
		c.DeadLetter(ReasonUnknownFence, fmt.Errorf("fence %q is not in the catalogue (version %d) and never was; the trigger says version %d", t.GetFenceId(), cat.Version(), t.GetCatalogueVersion()))
		return nil
	}
	out.byFence.Send(c, t.GetFenceId(), t)
	return nil
}

// handleLooped applies a fence-keyed trigger to the record of its key (the
// fence's, or a salted part's), or sends it on to the part that holds its
// device.
func (out *outputs) handleLooped(c *Context, t *geofencepb.Trigger, lim Limits) error {
	if err := validateLooped(c.Key(), t); err != nil {
		out.m.count(Invalid)
		return err
	}
	if err := checkAuthentic("", false, t); err != nil { // the loop topic can be written to as well
		out.m.count(Invalid)
		c.DeadLetter(ReasonForged, err)
		return nil
	}
	if part, ok := peekForward(c.Key(), c.StateBytes(), t, lim); ok {
		// Not this record's device and nothing to write: a hop costs a scan
		// of the record, not its decoding.
		out.m.count(Forward)
		out.byFence.Send(c, part, t)
		return nil
	}
	occ := c.State()
	if occ == nil {
		occ = &geofencepb.Occupancy{FenceId: t.GetFenceId()}
	}
	wasSplit := occ.GetSaltBuckets() > 0
	changed, res := Apply(occ, t, lim)
	out.m.count(res)
	switch res {
	case Invalid: // validateLooped passed, so only a state for another fence
		return fmt.Errorf("occupancy: state of key %q belongs to fence %q", c.Key(), occ.GetFenceId())
	case Forward:
		if !wasSplit {
			out.recordSplit(c, occ, t)
		}
		out.byFence.Send(c, PartKey(c.Key(), occ, t.GetDeviceId()), t)
		if changed {
			c.SetState(occ)
		}
		return nil
	case Applied:
	default:
		c.Logger().Debug("trigger not applied", "result", res.String(), "device", t.GetDeviceId(), "trigger_id", t.GetTriggerId(), "hlc", t.GetHlc())
	}
	c.SetState(occ)
	return nil
}

// recordSplit records, as DESIGN rule 4 asks of salted keys, that the record
// at the context's key now spreads new devices over salted parts: a metric, a
// log line and a HotKey on the compacted hot-keys topic (key
// "occupancy-table/<key>"). The decision itself lives in the record
// (salt_buckets), which is what the processor and Total follow; the HotKey is
// for other consumers. decided_at_ms is the trigger's HLC time, so a replay
// writes the same record.
func (out *outputs) recordSplit(c *Context, occ *geofencepb.Occupancy, t *geofencepb.Trigger) {
	out.m.splits.Inc()
	c.Logger().Info("occupancy record full: new devices go to salted parts", "members", len(occ.GetMembers()), "buckets", occ.GetSaltBuckets())
	key := geofence.TopicOccupancy + "/" + c.Key()
	if topology.ValidateKey(key, 0) != nil {
		return // a fence id near the key limit: the record and the metric carry the decision
	}
	out.hotKeys.Emit(c, key, &kitpb.HotKey{
		Topic: geofence.TopicOccupancy, Key: c.Key(), Salted: true,
		SaltBuckets: occ.GetSaltBuckets(), DecidedAtMs: hlc.Wall(t.GetHlc()),
	})
}
