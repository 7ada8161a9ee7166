package occupancy

import (
	"context"
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
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/hlc"
)

// metrics are occupancy's, registered on Registerer's registry.
type metrics struct {
	// seenBy are the counters by Result of each stage, looked up once (which
	// also exports zeros) rather than by label on every record.
	triggers, changes [len(resultNames)]prometheus.Counter
	invalid           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	triggers, err1 := collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_occupancy_triggers_total",
		Help: "Triggers occupancy-members took from fence-triggers, by result: applied (to the device's member register; a flip or a DWELL is sent on as a change), duplicate (the member's last trigger again), stale (overtaken by a later trigger), expired (older than the device record's horizon for a fence it no longer holds), full (the device's record holds its limit of fences; dead-lettered) or invalid (dead-lettered).",
	}, []string{"result"}))
	changes, err2 := collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_occupancy_changes_total",
		Help: "Count changes the occupancy group took from occupancy-changes, by result: applied, duplicate (already applied: sent again after occupancy-members crashed or moved) or invalid (dead-lettered).",
	}, []string{"result"}))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	m := &metrics{}
	for r := range m.triggers {
		m.triggers[r] = triggers.WithLabelValues(Result(r).String())
		m.changes[r] = changes.WithLabelValues(Result(r).String())
	}
	m.invalid = m.triggers[Invalid]
	return m, nil
}

// Group is the Goka group type of occupancy's fence-keyed counts.
type Group = group.Group[geofencepb.Occupancy, *geofencepb.Occupancy]

// Context is the handler context of occupancy's counts.
type Context = group.Context[geofencepb.Occupancy, *geofencepb.Occupancy]

// MembersGroup is the Goka group type of occupancy's device-keyed member
// registers.
type MembersGroup = group.Group[geofencepb.DeviceMembership, *geofencepb.DeviceMembership]

// MembersContext is the handler context of occupancy's member registers.
type MembersContext = group.Context[geofencepb.DeviceMembership, *geofencepb.DeviceMembership]

// Groups are occupancy's two groups, built from one set of options: Members
// (occupancy-members, key device_id) and Counts (occupancy, key fence_id).
type Groups struct {
	Members *MembersGroup
	Counts  *Group
}

// Processors builds both processors against a broker (topology check,
// state directories, pinned hasher, oldest offsets), Members first.
func (gs *Groups) Processors(ctx context.Context, cl cluster.Config, opts ...group.Opt) ([]*group.Processor, error) {
	mp, err := gs.Members.Processor(ctx, cl, opts...)
	if err != nil {
		return nil, err
	}
	cp, err := gs.Counts.Processor(ctx, cl, opts...)
	if err != nil {
		return nil, err
	}
	return []*group.Processor{mp, cp}, nil
}

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
	// unorderedOutputs leaves occupancy-members on sarama's five requests in
	// flight; only the ordering fault test sets it (export_test.go), to show
	// it fails without group.OrderedOutputs.
	unorderedOutputs bool
}

// defaultConfig is every default of occupancy's options, in one place.
func defaultConfig() config {
	return config{limits: Limits{}.withDefaults(), log: slog.Default(), lagEvery: DefaultLagInterval, registerer: prometheus.DefaultRegisterer}
}

// stateCacheBytes bounds the encoded records whose decoded form each group
// keeps (group.CacheEnvelopes, with the states in the same entries): 16 MB,
// some 8,000 fence records listing 100 devices, or 80,000 device records.
const stateCacheBytes = 16 << 20

// Dead-letter reasons of occupancy.
const (
	// ReasonUnknownFence: a trigger for a fence the catalogue has never held.
	ReasonUnknownFence = "unknown-fence"
	// ReasonMemberLimit: a trigger for a new fence of a device whose record
	// holds MaxMembers fences, none of them left before the trigger.
	ReasonMemberLimit = "member-limit"
)

// Catalogue checks every trigger's fence against cat (default: none, every
// fence is accepted): a trigger for a fence the catalogue has never held —
// current or deleted — is dead-lettered with reason unknown-fence instead of
// creating occupancy for it. A trigger stamped with a catalogue version the
// catalogue has not reached yet is accepted: the fence may be that new.
func Catalogue(cat *fences.Catalogue) Opt { return func(c *config) { c.cat = cat } }

// DevicesCap bounds the devices listed per fence (default
// DefaultDevicesCap). Counts are exact whatever the cap.
func DevicesCap(n int) Opt { return func(c *config) { c.limits.DevicesCap = n } }

// Horizon sets how long, in the triggers' HLC time, a device's record
// remembers a fence the device left (default DefaultHorizon); see the
// package documentation for what a trigger later than that does.
func Horizon(d time.Duration) Opt { return func(c *config) { c.limits.Horizon = d } }

// MaxMembers sets how many fences one device's record holds (default
// DefaultMaxMembers). New refuses a value whose worst-case record exceeds
// MaxRecordBytes.
func MaxMembers(n int) Opt { return func(c *config) { c.limits.MaxMembers = n } }

// Registerer sets where occupancy's metrics are registered (default
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

// validate refuses options that cannot work, naming each.
func (c *config) validate() error {
	var errs []error
	if c.limits.DevicesCap <= 0 {
		errs = append(errs, fmt.Errorf("DevicesCap: must be positive, got %d", c.limits.DevicesCap))
	}
	if c.limits.Horizon <= 0 {
		errs = append(errs, fmt.Errorf("Horizon: must be positive, got %v", c.limits.Horizon))
	}
	if c.limits.MaxMembers <= 0 {
		errs = append(errs, fmt.Errorf("MaxMembers: must be positive, got %d", c.limits.MaxMembers))
	}
	if c.registerer == nil {
		errs = append(errs, errors.New("Registerer: nil registerer"))
	}
	if len(errs) == 0 { // the record bound needs the limits above
		if err := c.limits.Validate(); err != nil {
			errs = append(errs, err) // names the limits
		}
	}
	return errors.Join(errs...)
}

// New defines occupancy's two groups over topo's declarations:
// occupancy-members reads fence-triggers (key device_id), applies each
// trigger to the device's member register at its fence and sends what it
// did to the fence's count to occupancy-changes, keyed by fence_id, across
// the topology's declared ordering boundary; occupancy adds the changes up
// in occupancy-table (key fence_id). Invalid triggers and changes go to the
// dead-letter topic. Build the processors with Groups.Processors.
func New(topo *topology.Topology, opts ...Opt) (*Groups, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("occupancy: %w", err)
	}
	if _, ok := topo.Boundary(geofence.GroupOccupancyMembers, geofence.TopicTriggers, geofence.TopicOccupancyChanges); !ok {
		return nil, fmt.Errorf("occupancy: topology %s does not declare the ordering boundary %s -> %s", topo.Name, geofence.TopicTriggers, geofence.TopicOccupancyChanges)
	}
	tp, ok := topo.Topic(geofence.TopicTriggers)
	if !ok {
		return nil, fmt.Errorf("occupancy: topology %s declares no topic %s", topo.Name, geofence.TopicTriggers)
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("occupancy: metrics: %w", err)
	}
	// A change finds its fence's record, and a trigger its device's, as
	// they were last written: no store read, and no decode of the envelope
	// or the state (decoding was a third of the counts' CPU). Handlers never
	// keep a record past their callback. The states are kept in the
	// envelopes' entries, under their budget.
	caches := []group.Opt{group.CacheEnvelopes(stateCacheBytes), group.CacheStates(stateCacheBytes)}
	// The counts drop a change at or below the last source offset applied
	// from its partition, so one partition's changes must land in order.
	members := group.New[geofencepb.DeviceMembership](topo, geofence.GroupOccupancyMembers, cfg.log,
		append(caches, group.OrderedOutputs(!cfg.unorderedOutputs))...)
	changes := group.Output[geofencepb.OccupancyChange](members, geofence.TopicOccupancyChanges)
	group.Stream(members, geofence.TopicTriggers, func(c *MembersContext, t *geofencepb.Trigger) error {
		return handleTrigger(c, t, cfg, m, changes)
	})
	counts := group.New[geofencepb.Occupancy](topo, geofence.GroupOccupancy, cfg.log, caches...)
	group.Stream(counts, geofence.TopicOccupancyChanges, func(c *Context, ch *geofencepb.OccupancyChange) error {
		return handleChange(c, ch, tp.Partitions, cfg.limits, m)
	})
	return &Groups{Members: members, Counts: counts}, nil
}

// handleTrigger applies a device-keyed trigger to the device's member
// register at its fence and sends a flip (or a DWELL) on to the fence.
func handleTrigger(c *MembersContext, t *geofencepb.Trigger, cfg config, m *metrics, changes group.Out[geofencepb.OccupancyChange, *geofencepb.OccupancyChange]) error {
	if err := validate(t); err != nil {
		m.invalid.Inc()
		return err
	}
	if err := checkAuthentic(c.Key(), true, t); err != nil {
		m.invalid.Inc()
		c.DeadLetter(ReasonForged, err)
		return nil
	}
	// A trigger from a clock ahead would hold the device's member register
	// at its fence until the clock caught up (registers order by HLC: every
	// real trigger before then would be stale). As the debouncer does for
	// pings (DESIGN rule 9).
	if err := c.CheckFuture(hlc.Time(t.GetHlc())); err != nil {
		c.DeadLetter(deadletter.ReasonFutureHLC, fmt.Errorf("trigger %s: %w", t.GetTriggerId(), err))
		return nil
	}
	if cat := cfg.cat; cat != nil && !cat.EverHeld(t.GetFenceId()) && t.GetCatalogueVersion() <= cat.Version() {
		m.invalid.Inc()
		c.DeadLetter(ReasonUnknownFence, fmt.Errorf("fence %q is not in the catalogue (version %d) and never was; the trigger says version %d", t.GetFenceId(), cat.Version(), t.GetCatalogueVersion()))
		return nil
	}
	st := c.State()
	if st == nil {
		st = &geofencepb.DeviceMembership{DeviceId: t.GetDeviceId()}
	}
	delta, send, res := ApplyTrigger(st, t, cfg.limits)
	m.triggers[res].Inc()
	switch res {
	case Invalid: // Validate passed, so only a state of another device
		return fmt.Errorf("occupancy: state of key %q belongs to device %q", c.Key(), st.GetDeviceId())
	case Full:
		c.DeadLetter(ReasonMemberLimit, fmt.Errorf("device %q is held at %d fences, none left before HLC %d; raise --max-members to count it at fence %q", c.Key(), len(st.GetFences()), t.GetHlc(), t.GetFenceId()))
		return nil
	case Ignored: // a CROSS: no membership, no state to write
		return nil
	case Applied:
	default:
		c.Logger().Debug("trigger not applied", "result", res.String(), "fence", t.GetFenceId(), "trigger_id", t.GetTriggerId(), "hlc", t.GetHlc())
	}
	c.SetState(st)
	if send {
		changes.Emit(c, t.GetFenceId(), Change(t, delta, c.Partition(), c.Offset()))
	}
	return nil
}

// handleChange adds a change up in its fence's record.
func handleChange(c *Context, ch *geofencepb.OccupancyChange, partitions int32, lim Limits, m *metrics) error {
	if err := ValidateChange(c.Key(), ch, partitions); err != nil {
		m.changes[Invalid].Inc()
		return err
	}
	occ := c.State()
	if occ == nil {
		occ = &geofencepb.Occupancy{FenceId: ch.GetFenceId()}
	}
	res := ApplyChange(occ, ch, lim)
	m.changes[res].Inc()
	if res == Invalid { // ValidateChange passed, so only a state of another fence
		return fmt.Errorf("occupancy: state of key %q belongs to fence %q", c.Key(), occ.GetFenceId())
	}
	c.SetState(occ)
	return nil
}
