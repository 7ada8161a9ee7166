package occupancy

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

var triggersSeen = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "fencestream_occupancy_triggers_total",
	Help: "Triggers the occupancy processor took from its fence-keyed loop, by result: applied, duplicate (the member's last trigger again), stale (overtaken by a later trigger) or invalid (dead-lettered).",
}, []string{"result"})

func init() {
	for _, r := range []Result{Applied, Duplicate, Stale, Invalid} {
		triggersSeen.WithLabelValues(r.String()) // export zeros
	}
}

// Group is the Goka group type of the occupancy processor.
type Group = group.Group[geofencepb.Occupancy, *geofencepb.Occupancy]

// Context is the handler context of the occupancy processor.
type Context = group.Context[geofencepb.Occupancy, *geofencepb.Occupancy]

// Opt configures the occupancy processor.
type Opt func(*config)

type config struct {
	devicesCap int
	log        *slog.Logger
	cat        *fences.Catalogue
}

// ReasonUnknownFence is the dead-letter reason of a trigger for a fence the
// catalogue has never held.
const ReasonUnknownFence = "unknown-fence"

// WithCatalogue checks every trigger's fence against cat (default: none, every
// fence is accepted): a trigger for a fence the catalogue has never held —
// current or deleted — is dead-lettered with reason unknown-fence instead of
// creating occupancy for it. A trigger stamped with a catalogue version the
// catalogue has not reached yet is accepted: the fence may be that new.
func WithCatalogue(cat *fences.Catalogue) Opt { return func(c *config) { c.cat = cat } }

// WithDevicesCap bounds the devices listed per fence (default
// DefaultDevicesCap). Counts are exact whatever the cap.
func WithDevicesCap(n int) Opt { return func(c *config) { c.devicesCap = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Opt { return func(c *config) { c.log = l } }

func (c *config) validate() error {
	if c.devicesCap <= 0 {
		return fmt.Errorf("occupancy: devices cap must be positive, got %d", c.devicesCap)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return nil
}

// New defines the occupancy group over topo's "occupancy" declaration:
// fence-triggers (key device_id) are validated and looped back keyed by
// fence_id, across the topology's declared ordering boundary; the loop handler
// applies them to the fence's Occupancy in occupancy-table. Invalid triggers go
// to the dead-letter topic. Build the processor with Group.Processor.
func New(topo *topology.Topology, opts ...Opt) (*Group, error) {
	cfg := config{devicesCap: DefaultDevicesCap, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, ok := topo.Boundary(topology.GroupOccupancy, topology.TopicTriggers, topology.TopicOccupancyLoop); !ok {
		return nil, fmt.Errorf("occupancy: topology %s does not declare the ordering boundary %s -> %s", topo.Name, topology.TopicTriggers, topology.TopicOccupancyLoop)
	}
	g := group.New[geofencepb.Occupancy](topo, topology.GroupOccupancy, cfg.log)
	group.Stream(g, topology.TopicTriggers, func(c *Context, t *geofencepb.Trigger) error { return handleTrigger(c, t, cfg.cat) })
	byFence = group.Loop(g, func(c *Context, t *geofencepb.Trigger) error { return handleLooped(c, t, cfg.devicesCap) })
	return g, nil
}

// byFence sends to the group's fence-keyed loop.
var byFence group.LoopOut[geofencepb.Trigger, *geofencepb.Trigger]

// handleTrigger re-keys a device-keyed trigger by its fence: the boundary.
func handleTrigger(c *Context, t *geofencepb.Trigger, cat *fences.Catalogue) error {
	if err := Validate(c.Key(), t); err != nil {
		triggersSeen.WithLabelValues(Invalid.String()).Inc()
		return err
	}
	if cat != nil && !cat.EverHeld(t.GetFenceId()) && t.GetCatalogueVersion() <= cat.Version() {
		triggersSeen.WithLabelValues(Invalid.String()).Inc()
		c.DeadLetter(ReasonUnknownFence, fmt.Errorf("fence %q is not in the catalogue (version %d) and never was; the trigger says version %d", t.GetFenceId(), cat.Version(), t.GetCatalogueVersion()))
		return nil
	}
	byFence.Send(c, t.GetFenceId(), t)
	return nil
}

// handleLooped applies a fence-keyed trigger to the fence's occupancy.
func handleLooped(c *Context, t *geofencepb.Trigger, cap int) error {
	if err := validateLooped(c.Key(), t); err != nil {
		triggersSeen.WithLabelValues(Invalid.String()).Inc()
		return err
	}
	occ := c.State()
	if occ == nil {
		occ = &geofencepb.Occupancy{FenceId: c.Key()}
	}
	_, res := Apply(occ, t, cap)
	triggersSeen.WithLabelValues(res.String()).Inc()
	if res == Invalid { // validateLooped passed, so only a state for another fence
		return fmt.Errorf("occupancy: state of key %q belongs to fence %q", c.Key(), occ.GetFenceId())
	}
	if res != Applied {
		c.Logger().Debug("trigger not applied", "result", res.String(), "device", t.GetDeviceId(), "trigger_id", t.GetTriggerId(), "hlc", t.GetHlc())
	}
	c.SetState(occ)
	return nil
}
