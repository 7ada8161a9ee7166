package visits

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
	"github.com/fencestream/fencestream/topology"
)

// Bounds and horizons (see the package doc).
const (
	DeviceTTL     = 7 * 24 * time.Hour
	DedupHorizon  = time.Hour
	WindowSize    = time.Hour
	WindowGrace   = 10 * time.Minute
	WindowRetain  = 24 * time.Hour
	RecentVisits  = 20
	maxSeenDevice = 256
	maxSeenFence  = 1024
)

// metrics are the visits processors', registered on the Registerer New is
// given.
type metrics struct {
	visitsEmitted, unpairedExits prometheus.Counter
	duplicates                   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (m metrics, err error) {
	var e1, e2, e3 error
	m.visitsEmitted, e1 = collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_visits_total",
		Help: "Visits emitted to fence-visits (an ENTER paired with its EXIT).",
	}))
	m.unpairedExits, e2 = collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_visits_unpaired_exits_total",
		Help: "EXITs whose ENTER the visits state did not hold (the group started after it, or the device expired); no visit is emitted.",
	}))
	m.duplicates, e3 = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_visits_duplicates_total",
		Help: "Records dropped as duplicates by id, by group.",
	}, []string{"group"}))
	return m, errors.Join(e1, e2, e3)
}

// Handler contexts of the two processes.
type (
	DeviceContext = group.Context[visitspb.DeviceVisits, *visitspb.DeviceVisits]
	FenceContext  = group.Context[visitspb.FenceVisits, *visitspb.FenceVisits]
	// Window is one hourly window of a fence.
	Window = windows.Window[emptypb.Empty, *emptypb.Empty]
)

func triggerTime(t *geofencepb.Trigger) time.Time { return time.UnixMilli(t.GetEventTimeMs()) }

// New builds the visits app over topo's declarations (its three groups:
// visits, visit-rekey, visit-stats); its metrics are registered on reg
// (nil: prometheus.DefaultRegisterer).
func New(topo *topology.Topology, log *slog.Logger, reg prometheus.Registerer) (*streams.App, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("visits: metrics: %w", err)
	}
	b := streams.New(topo, geofence.GroupVisitRekey, log)
	triggers := b.Stream[geofencepb.Trigger](geofence.TopicTriggers, streams.EventTime(triggerTime))
	triggers.Process(geofence.GroupVisits, m.pairing, group.StateTTL(DeviceTTL)).To(geofence.TopicVisits)

	// The boundary: ENTERs (as open visits) and visits re-keyed by fence,
	// in group visit-rekey, across the boundaries the topology declares.
	byFence := b.Stream[visitspb.Visit](geofence.TopicVisitsByFence, streams.EventTime(visitTime))
	fence := func(_ string, v *visitspb.Visit) string { return v.GetFenceId() }
	invalid := streams.DeadLetter(deadletter.ReasonInvalid)
	triggers.Filter(isEnter).FilterNot(badEnter, invalid).MapValues(openVisit).
		SelectKey(topology.Boundary{}, geofence.TopicVisitsByFence, fence)
	b.Stream[visitspb.Visit](geofence.TopicVisits).FilterNot(badVisit, invalid).
		SelectKey(topology.Boundary{}, geofence.TopicVisitsByFence, fence)
	byFence.Process(geofence.GroupVisitStats, m.stats)
	return b.Build()
}

func isEnter(_ string, t *geofencepb.Trigger) bool {
	return t.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_ENTER
}

// badEnter and badVisit are what visit-rekey dead-letters: a record not
// under its device's key, or without what the stats need.
func badEnter(key string, t *geofencepb.Trigger) bool {
	return t.GetDeviceId() != key || t.GetFenceId() == "" || t.GetTriggerId() == "" || t.GetEventTimeMs() <= 0
}

func badVisit(key string, v *visitspb.Visit) bool {
	return v.GetDeviceId() != key || v.GetFenceId() == "" || v.GetVisitId() == "" || v.GetLeftMs() <= 0
}

// openVisit is an ENTER as the open visit it starts.
func openVisit(t *geofencepb.Trigger) *visitspb.Visit {
	return &visitspb.Visit{VisitId: t.GetTriggerId(), DeviceId: t.GetDeviceId(), FenceId: t.GetFenceId(), EnteredMs: t.GetEventTimeMs()}
}

// pairing is the visits process: its handler forwards each visit.
type pairing struct {
	visits *streams.Processing[visitspb.DeviceVisits, *visitspb.DeviceVisits, visitspb.Visit]
	m      metrics
}

func (m metrics) pairing(p *streams.Processing[visitspb.DeviceVisits, *visitspb.DeviceVisits, visitspb.Visit]) func(*DeviceContext, *geofencepb.Trigger) error {
	return (&pairing{visits: p, m: m}).pairTrigger
}

// pairTrigger keeps a device's open visits and emits a visit at each EXIT.
func (p *pairing) pairTrigger(c *DeviceContext, t *geofencepb.Trigger) error {
	if t.GetDeviceId() != c.Key() || t.GetFenceId() == "" || t.GetTriggerId() == "" {
		return fmt.Errorf("trigger %q of device %q fence %q under key %q", t.GetTriggerId(), t.GetDeviceId(), t.GetFenceId(), c.Key())
	}
	st := c.State()
	if st == nil {
		st = &visitspb.DeviceVisits{}
	}
	if st.Seen == nil {
		st.Seen = &kitpb.SeenSet{}
	}
	if (group.Dedup{Horizon: DedupHorizon, Max: maxSeenDevice}).Seen(st.Seen, t.GetTriggerId(), triggerTime(t)) {
		p.m.duplicates.WithLabelValues(geofence.GroupVisits).Inc()
		return nil
	}
	if st.Open == nil {
		st.Open = map[string]*visitspb.OpenVisit{}
	}
	switch t.GetType() {
	case geofencepb.TriggerType_TRIGGER_TYPE_ENTER:
		st.Open[t.GetFenceId()] = &visitspb.OpenVisit{EnterTriggerId: t.GetTriggerId(), EnteredMs: t.GetEventTimeMs()}
	case geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
		open, ok := st.Open[t.GetFenceId()]
		if !ok {
			p.m.unpairedExits.Inc()
			c.Logger().Debug("EXIT without its ENTER; no visit", "fence", t.GetFenceId(), "trigger_id", t.GetTriggerId())
			break
		}
		delete(st.Open, t.GetFenceId())
		if err := p.visits.Forward(c, c.Key(), &visitspb.Visit{
			VisitId: open.GetEnterTriggerId(), DeviceId: c.Key(), FenceId: t.GetFenceId(),
			EnteredMs: open.GetEnteredMs(), LeftMs: t.GetEventTimeMs(), DurationMs: max(0, t.GetEventTimeMs()-open.GetEnteredMs()),
			ExitReason: t.GetReason(),
		}); err != nil {
			return err
		}
		p.m.visitsEmitted.Inc()
	}
	c.SetState(st)
	return nil
}

// stats holds the windows of the visit-stats process.
type stats struct {
	enters, dwell *windows.Windows[visitspb.FenceVisits, *visitspb.FenceVisits, emptypb.Empty, *emptypb.Empty]
	m             metrics
}

// stats sets up the visit-stats process: two hourly windows per fence. It
// forwards nothing: its table is what it makes.
func (m metrics) stats(p *streams.Processing[visitspb.FenceVisits, *visitspb.FenceVisits, emptypb.Empty]) func(*FenceContext, *visitspb.Visit) error {
	spec := windows.Tumbling(WindowSize, WindowGrace).Retain(WindowRetain)
	set := func(ws **kitpb.WindowSet) *kitpb.WindowSet {
		if *ws == nil {
			*ws = &kitpb.WindowSet{}
		}
		return *ws
	}
	s := &stats{
		m:      m,
		enters: windows.NewWindows[emptypb.Empty](p.Group(), "enters", spec, func(st *visitspb.FenceVisits) *kitpb.WindowSet { return set(&st.Enters) }, nil),
		dwell:  windows.NewWindows[emptypb.Empty](p.Group(), "dwell", spec, func(st *visitspb.FenceVisits) *kitpb.WindowSet { return set(&st.Dwell) }, nil),
	}
	return s.apply
}

// visitTime is a fence-keyed record's event time: the EXIT of a visit, the
// ENTER of an open one.
func visitTime(v *visitspb.Visit) time.Time {
	if v.GetLeftMs() > 0 {
		return time.UnixMilli(v.GetLeftMs())
	}
	return time.UnixMilli(v.GetEnteredMs())
}

// apply adds a fence-keyed record to the fence's windows.
func (s *stats) apply(c *FenceContext, v *visitspb.Visit) error {
	if v.GetFenceId() != c.Key() {
		return fmt.Errorf("visit of fence %q under key %q", v.GetFenceId(), c.Key())
	}
	st := c.State()
	if st == nil {
		st = &visitspb.FenceVisits{FenceId: c.Key()}
	}
	if st.Seen == nil {
		st.Seen = &kitpb.SeenSet{}
	}
	id, open := "V|"+v.GetVisitId(), v.GetLeftMs() == 0
	if open {
		id = "E|" + v.GetVisitId()
	}
	if (group.Dedup{Horizon: DedupHorizon, Max: maxSeenFence}).Seen(st.Seen, id, visitTime(v)) {
		s.m.duplicates.WithLabelValues(geofence.GroupVisitStats).Inc()
		return nil
	}
	var err error
	if open {
		err = s.enters.Add(c, st, visitTime(v), 1, nil)
	} else {
		err = s.dwell.Add(c, st, visitTime(v), time.Duration(v.GetDurationMs()*int64(time.Millisecond)).Seconds(), nil)
		st.Recent = append(st.Recent, v)
		if n := len(st.Recent); n > RecentVisits {
			st.Recent = slices.Delete(st.Recent, 0, n-RecentVisits)
		}
	}
	if err != nil && !errors.Is(err, windows.ErrLate) { // late: counted by the kit, dropped
		return err
	}
	c.SetState(st)
	return nil
}

// Hour is one hour of a fence's statistics.
type Hour struct {
	Start        time.Time `json:"start"`
	Enters       int64     `json:"enters"`
	Visits       int64     `json:"visits"`
	MeanDwellSec float64   `json:"mean_dwell_s"`
	Final        bool      `json:"final"`
}

// Hours merges a fence's two window sets into hours, oldest first.
func Hours(st *visitspb.FenceVisits) ([]Hour, error) {
	enters, err := windows.WindowsOf[emptypb.Empty](st.GetEnters())
	if err != nil {
		return nil, err
	}
	dwell, err := windows.WindowsOf[emptypb.Empty](st.GetDwell())
	if err != nil {
		return nil, err
	}
	byStart := map[int64]*Hour{}
	var out []*Hour
	get := func(w Window) *Hour {
		h := byStart[w.Start.UnixMilli()]
		if h == nil {
			h = &Hour{Start: w.Start.UTC(), Final: true}
			byStart[w.Start.UnixMilli()] = h
			out = append(out, h)
		}
		h.Final = h.Final && w.Closed
		return h
	}
	for _, w := range enters {
		get(w).Enters = w.Count
	}
	for _, w := range dwell {
		h := get(w)
		h.Visits, h.MeanDwellSec = w.Count, w.Mean()
	}
	slices.SortFunc(out, func(a, b *Hour) int { return a.Start.Compare(b.Start) })
	res := make([]Hour, len(out))
	for i, h := range out {
		res[i] = *h
	}
	return res, nil
}
