package debounce

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Invalid-ping errors (the processor dead-letters such pings with the reason).
var (
	ErrBadCoordinates = errors.New("coordinates are not finite or out of range")
	ErrBadAccuracy    = errors.New("accuracy is negative or not finite")
	ErrNoEventTime    = errors.New("device time is missing")
	ErrDeviceMismatch = errors.New("device_id differs from the record key")
)

// ErrImplausible: a ping's value is well-formed but cannot be a real fix (the
// processor dead-letters it with reason ReasonImplausible).
var ErrImplausible = errors.New("implausible value")

// ReasonImplausible is the dead-letter reason of a ping CheckPlausible refuses.
const ReasonImplausible = "implausible"

// DefaultMaxAccuracyM is the largest accuracy radius a ping may state by
// default (10 km): the fence search widens by the accuracy, so a ping claiming
// 1e9 m would be tested against every fence, and no fix that vague says
// anything about a fence.
const DefaultMaxAccuracyM = 10_000

// CheckPlausible refuses a ping whose accuracy is beyond maxAccuracyM, whose
// speed or heading is not finite, or with more than fences.MaxLabels groups or
// one longer than fences.MaxLabelBytes. Run it after ValidatePing.
func CheckPlausible(p *geofencepb.Ping, maxAccuracyM float64) error {
	switch {
	case p.GetAccuracyM() > maxAccuracyM:
		return fmt.Errorf("%w: accuracy %v m is beyond the maximum %v m", ErrImplausible, p.GetAccuracyM(), maxAccuracyM)
	case !finite(p.GetSpeedMps()):
		return fmt.Errorf("%w: speed %v m/s is not finite", ErrImplausible, p.GetSpeedMps())
	case !finite(p.GetHeadingDeg()):
		return fmt.Errorf("%w: heading %v° is not finite", ErrImplausible, p.GetHeadingDeg())
	case len(p.GetGroups()) > fences.MaxLabels:
		// The groups are kept in the device's state: bounded as a fence's are.
		return fmt.Errorf("%w: %d groups, limit %d", ErrImplausible, len(p.GetGroups()), fences.MaxLabels)
	}
	for _, g := range p.GetGroups() {
		if len(g) > fences.MaxLabelBytes {
			return fmt.Errorf("%w: a group of %d bytes, limit %d", ErrImplausible, len(g), fences.MaxLabelBytes)
		}
	}
	return nil
}

// ValidatePing checks a ping against its record key before anything is applied.
func ValidatePing(key string, p *geofencepb.Ping) error {
	switch {
	case p.GetDeviceId() != "" && p.GetDeviceId() != key:
		return fmt.Errorf("%w: key %q, device_id %q", ErrDeviceMismatch, key, p.GetDeviceId())
	case !finite(p.GetLat()) || !finite(p.GetLon()) || math.Abs(p.GetLat()) > 90 || math.Abs(p.GetLon()) > 180:
		return fmt.Errorf("%w: lat %v lon %v", ErrBadCoordinates, p.GetLat(), p.GetLon())
	case !finite(p.GetAccuracyM()) || p.GetAccuracyM() < 0:
		return fmt.Errorf("%w: %v", ErrBadAccuracy, p.GetAccuracyM())
	case p.GetDeviceTimeMs() <= 0:
		return ErrNoEventTime
	}
	return nil
}

// PingHLC is the ping's hybrid logical clock: the producer's, or for a producer
// that sets none (hlc = 0), one derived from the device time (physical part =
// device_time_ms, logical 0). 0 when the ping has neither.
func PingHLC(p *geofencepb.Ping) uint64 {
	if h := p.GetHlc(); h != 0 {
		return h
	}
	if ms := p.GetDeviceTimeMs(); ms > 0 {
		return hlc.Pack(ms, 0)
	}
	return 0
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Resolved returns a fence's debounce settings overlaid on defaults.
func Resolved(defaults Settings, f *fences.Fence) Settings {
	s := defaults
	o := f.Settings
	if o.MinSamples > 0 {
		s.MinSamples = int(o.MinSamples)
	}
	if o.MinDwell > 0 {
		s.MinDwell = o.MinDwell
	}
	if o.HysteresisM > 0 {
		s.Hysteresis = o.HysteresisM
	}
	if o.Loiter > 0 {
		s.Loiter = o.Loiter
	}
	if o.SilenceTimeout > 0 {
		s.SilenceTimeout = o.SilenceTimeout
	}
	if o.Detector != "" {
		s.Detector = Detector(o.Detector)
	}
	if o.Crossing {
		s.Crossing = true
	}
	return s
}

// Outcome is what applying one ping did.
type Outcome struct {
	Triggers []*geofencepb.Trigger
	// FlapsSuppressed counts candidate transitions abandoned before confirmation
	// (ENTERING back to OUTSIDE, EXITING back to INSIDE).
	FlapsSuppressed int
	// Changed reports whether st must be written back.
	Changed bool
}

// accuracyMarginM is how far beyond the largest hysteresis Apply looks for
// fences, on top of the ping's accuracy, so fences a device is just outside
// of are measured too.
const accuracyMarginM = 1

// Apply runs one valid, non-stale ping through every fence near it and every
// fence the device has live state for. st is modified in place (it must be
// non-nil, with DeviceId set); the caller has already audited the HLC.
func Apply(st *geofencepb.DeviceState, p *geofencepb.Ping, snap *fences.Snapshot, defaults Settings) Outcome {
	a := applierPool.Get().(*applier)
	a.st, a.p, a.snap, a.defaults = st, p, snap, defaults
	a.sample = Sample{TimeMs: p.GetDeviceTimeMs(), AccuracyM: p.GetAccuracyM(), Implausible: implausible(st, p, defaults)}
	margin := math.Max(snap.MaxHysteresisM(), defaults.Hysteresis) + p.GetAccuracyM() + accuracyMarginM
	snap.Near(p.GetLat(), p.GetLon(), margin, a.visit)
	out := a.out
	// Fences with live state that Near did not reach: the device is far outside
	// them (or they were deleted). Iterate over a copy: record edits the slice.
	if len(st.FenceStates) > 0 {
		a.pending = append(a.pending[:0], st.FenceStates...)
		for _, e := range a.pending {
			id, prev := e.FenceId, e.State
			if contains(a.visited, id) {
				continue
			}
			f, ok := snap.Get(id)
			if !ok {
				setFenceState(st, id, nil)
				out.Changed = true
				if prev.GetPhase() == geofencepb.Phase_PHASE_INSIDE || prev.GetPhase() == geofencepb.Phase_PHASE_EXITING {
					out.Triggers = append(out.Triggers, trigger(st.DeviceId, id, nil, geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerReason_TRIGGER_REASON_FENCE_DELETED, p, snap.Version()))
				}
				continue
			}
			if !f.Applies(p.GetGroups()) {
				leaveGroup(st, &out, &f, prev, p, snap.Version())
				continue
			}
			a.sample.Distance = f.SignedDistance(p.GetLat(), p.GetLon())
			next, fired := Step(prev, a.sample, Resolved(defaults, &f))
			record(st, &out, &f, prev, next, fired, p, snap.Version())
		}
	}
	clear(a.pending)
	if defaults.Crossing || snap.CrossingFences() > 0 {
		out.Triggers = appendCrossings(out.Triggers, st, p, snap, defaults, a.sample.Implausible)
		st.LastAccuracyM = p.GetAccuracyM()
	}
	*a = applier{visit: a.visit, visited: a.visited[:0], pending: a.pending[:0]}
	applierPool.Put(a)
	st.LastHlc = p.GetHlc()
	st.LastEventTimeMs = max(st.LastEventTimeMs, p.GetDeviceTimeMs())
	st.LastLat, st.LastLon = p.GetLat(), p.GetLon()
	st.Pings++
	st.CatalogueVersion = snap.Version()
	st.Triggers += uint64(len(out.Triggers))
	if !slices.Equal(st.Groups, p.GetGroups()) {
		st.Groups = p.GetGroups()
		out.Changed = true
	}
	return out
}

// leaveGroup ends the device's state at a fence that no longer applies to
// it (its ping names none of the fence's groups): EXIT, reason GROUP_LEFT,
// if it was inside; a candidate ENTER is dropped without a trigger.
func leaveGroup(st *geofencepb.DeviceState, out *Outcome, f *fences.Fence, prev *geofencepb.FenceState, p *geofencepb.Ping, version uint64) {
	if prev == nil {
		return
	}
	setFenceState(st, f.ID, nil)
	out.Changed = true
	if ph := prev.GetPhase(); ph == geofencepb.Phase_PHASE_INSIDE || ph == geofencepb.Phase_PHASE_EXITING {
		out.Triggers = append(out.Triggers, trigger(st.DeviceId, f.ID, f, geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerReason_TRIGGER_REASON_GROUP_LEFT, p, version))
	}
}

// implausible reports whether p lies farther from the device's previous fix
// than defaults.MaxSpeedMS allows in the time between them, plus 3√2 σ of
// noise (σ as the sprt detector weighs p's accuracy). A first ping, a
// non-positive time step or a zero MaxSpeedMS is never implausible.
func implausible(st *geofencepb.DeviceState, p *geofencepb.Ping, defaults Settings) bool {
	if !(defaults.MaxSpeedMS > 0) || st.Pings == 0 {
		return false
	}
	dtMs := p.GetDeviceTimeMs() - st.LastEventTimeMs
	if dtMs <= 0 {
		return false
	}
	sigma := max(defaults.AccuracyFloorM, minSigmaM, defaults.AccuracyScale*p.GetAccuracyM())
	allow := defaults.MaxSpeedMS*float64(dtMs)/1000 + 3*math.Sqrt2*sigma
	// Equirectangular at the fix's latitude: exact enough below a few km,
	// and anything farther is implausible at 1 Hz anyway.
	dy := (p.GetLat() - st.LastLat) * metresPerDegree
	dLon := math.Mod(p.GetLon()-st.LastLon+540, 360) - 180
	dx := dLon * metresPerDegree * math.Cos(p.GetLat()*math.Pi/180)
	return dx*dx+dy*dy > allow*allow
}

// metresPerDegree is the fences package's equirectangular scale.
const metresPerDegree = 111_320.0

// applier carries one Apply call through the catalogue's Near callback. Pooled,
// with its method value bound once, so the hot path allocates no closure.
type applier struct {
	st       *geofencepb.DeviceState
	p        *geofencepb.Ping
	snap     *fences.Snapshot
	defaults Settings
	sample   Sample
	out      Outcome
	visited  []string // fences stepped via Near; usually 0–2
	pending  []*geofencepb.FenceEntry
	visit    func(*fences.Fence) bool
}

var applierPool = sync.Pool{New: func() any {
	a := &applier{}
	a.visit = a.step
	return a
}}

func (a *applier) step(f *fences.Fence) bool {
	prev := FenceStateOf(a.st, f.ID)
	// Every fence stepped here is marked, including ones that only now got
	// state, so the sweep over live state below never steps one twice.
	a.visited = append(a.visited, f.ID)
	if !f.Applies(a.p.GetGroups()) {
		leaveGroup(a.st, &a.out, f, prev, a.p, a.snap.Version())
		return true
	}
	a.sample.Distance = f.SignedDistance(a.p.GetLat(), a.p.GetLon())
	next, fired := Step(prev, a.sample, Resolved(a.defaults, f))
	record(a.st, &a.out, f, prev, next, fired, a.p, a.snap.Version())
	return true
}

func record(st *geofencepb.DeviceState, out *Outcome, f *fences.Fence, prev, next *geofencepb.FenceState, fired []Transition, p *geofencepb.Ping, version uint64) {
	id := f.ID
	if next != prev {
		out.Changed = true
		setFenceState(st, id, next)
		if abandoned(prev, next) {
			out.FlapsSuppressed++
		}
	}
	for _, t := range fired {
		out.Triggers = append(out.Triggers, trigger(st.DeviceId, id, f, t.Type, t.Reason, p, version))
	}
}

// abandoned: a candidate transition fell back to where it started.
func abandoned(prev, next *geofencepb.FenceState) bool {
	switch prev.GetPhase() {
	case geofencepb.Phase_PHASE_ENTERING:
		return next == nil
	case geofencepb.Phase_PHASE_EXITING:
		return next.GetPhase() == geofencepb.Phase_PHASE_INSIDE
	}
	return false
}

func contains(ids []string, id string) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// trigger builds one trigger. f is the fence's catalogue entry (nil for a
// deleted fence): its name and tags, and the ping's groups, are shared, not
// copied, so a trigger costs one allocation.
func trigger(device, fence string, f *fences.Fence, typ geofencepb.TriggerType, reason geofencepb.TriggerReason, p *geofencepb.Ping, version uint64) *geofencepb.Trigger {
	var name string
	var tags []string
	if f != nil {
		name, tags = f.Name, f.Tags
	}
	return &geofencepb.Trigger{
		FenceName:        name,
		FenceTags:        tags,
		DeviceGroups:     p.GetGroups(),
		TriggerId:        geofence.TriggerID(device, fence, typ, p.GetHlc()),
		DeviceId:         device,
		FenceId:          fence,
		Type:             typ,
		Reason:           reason,
		EventTimeMs:      p.GetDeviceTimeMs(),
		Hlc:              p.GetHlc(),
		CatalogueVersion: version,
		Lat:              p.GetLat(),
		Lon:              p.GetLon(),
	}
}

// Expire closes the stays of a silent device: every fence INSIDE or EXITING whose
// silence (nowMs minus the device's last event time) reached its timeout gets an
// EXIT with reason TIMEOUT, and a candidate ENTER of a silent device is dropped.
// The exit's event time is the device's last event time plus the fence's
// timeout — never nowMs, which only decides whether the timeout has passed — and
// its HLC is the larger of one above the device's last and that event time, so
// a replay yields the same trigger and the exit orders after everything the
// device sent before it. changed reports whether st must be written back.
func Expire(st *geofencepb.DeviceState, nowMs int64, snap *fences.Snapshot, defaults Settings) (out []*geofencepb.Trigger, changed bool) {
	for _, e := range slices.Clone(st.FenceStates) {
		id, prev := e.FenceId, e.State
		cfg := defaults
		var name string
		var tags []string
		if f, ok := snap.Get(id); ok {
			cfg = Resolved(defaults, &f)
			name, tags = f.Name, f.Tags
		}
		next, t, fired := Timeout(prev, st.LastEventTimeMs, nowMs, cfg)
		if !fired {
			if next == nil { // a silent candidate ENTER is dropped without a trigger
				setFenceState(st, id, nil)
				changed = true
			}
			continue
		}
		setFenceState(st, id, next)
		changed = true
		eventMs := st.LastEventTimeMs + cfg.SilenceTimeout.Milliseconds()
		st.LastHlc = max(st.LastHlc+1, hlc.Pack(eventMs, 0))
		out = append(out, &geofencepb.Trigger{
			TriggerId:        geofence.TriggerID(st.DeviceId, id, t.Type, st.LastHlc),
			DeviceId:         st.DeviceId,
			FenceId:          id,
			Type:             t.Type,
			Reason:           t.Reason,
			EventTimeMs:      eventMs,
			Hlc:              st.LastHlc,
			CatalogueVersion: snap.Version(),
			Lat:              st.LastLat,
			Lon:              st.LastLon,
			FenceName:        name,
			FenceTags:        tags,
			DeviceGroups:     st.Groups,
		})
	}
	st.Triggers += uint64(len(out))
	return out, changed
}
