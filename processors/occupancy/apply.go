package occupancy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Defaults and fixed bounds of a record (see the package documentation).
const (
	// DefaultDevicesCap is how many inside devices a record lists.
	DefaultDevicesCap = 100
	// DefaultHorizon is how long, in HLC time, a record remembers a device
	// that left.
	DefaultHorizon = 24 * time.Hour
	// DefaultMaxMembers is how many devices one record holds before it is
	// split. Chosen by BenchmarkTrigger: every record on a trigger's way is
	// decoded and encoded, so smaller records cost less per trigger, down to
	// where the extra loop pass per level (a Goka message, ~17 µs) dominates;
	// at 10,000 and 200,000 devices 64 allocates 3.3-3.7x less per trigger
	// than 256 for 0.65 more passes.
	DefaultMaxMembers = 64
	// SaltBuckets is how many salted parts a split record routes to. Part
	// keys are numbered with it, so it is fixed for a table's lifetime.
	SaltBuckets = 32
	// MaxRecordBytes is the stated bound of an occupancy-table record, well
	// below Kafka's 1 MB default message limit. New refuses Limits whose
	// worst case (RecordBound) exceeds it.
	MaxRecordBytes = 256 << 10
	// MaxTriggerIDBytes is the longest trigger_id accepted: the debouncer's
	// ids (device|fence|type|hlc) of the longest keys fit.
	MaxTriggerIDBytes = 2*topology.MaxKeyBytes + 32
)

// Limits are what Apply enforces on a record. Zero fields take their
// defaults.
type Limits struct {
	// DevicesCap bounds the devices listed (default DefaultDevicesCap).
	DevicesCap int
	// Horizon is how long after its last trigger (in the triggers' HLC time)
	// a device that left is still remembered (default DefaultHorizon).
	Horizon time.Duration
	// MaxMembers is how many devices a record holds; a record that is full
	// when a new device arrives is split (default DefaultMaxMembers).
	MaxMembers int
}

func (l Limits) withDefaults() Limits {
	if l.DevicesCap <= 0 {
		l.DevicesCap = DefaultDevicesCap
	}
	if l.Horizon <= 0 {
		l.Horizon = DefaultHorizon
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	return l
}

// Worst-case encoded sizes (protobuf wire format) of the parts of a record
// whose ids are as long as the key rules allow: a map entry holds a device
// id and a Member (inside, last_hlc, last_trigger_id, since_ms); varints are
// at most 10 bytes; a length prefix below 16 KiB is at most 2.
const (
	maxIDField       = 1 + 2 + topology.MaxKeyBytes
	maxVarintField   = 1 + 10
	maxMemberBytes   = 2 + maxVarintField + (1 + 2 + MaxTriggerIDBytes) + maxVarintField
	maxMemberEntry   = 1 + 2 + maxIDField + (1 + 2 + maxMemberBytes)
	maxFixedFields   = maxIDField + 12*maxVarintField + 1 + (1 + 5) // field 16 has a 2-byte tag
	maxSplittableKey = topology.MaxKeyBytes - len("#") - 13         // room for a part number of 13 digits (depth 8 at 32 buckets)
)

// RecordBound is the largest a record can encode to under l, whatever the
// history: at most MaxMembers members and DevicesCap listed devices, every id
// at its longest. Records of fences whose id is too long to salt
// (> MaxKeyBytes - 14 bytes) are the exception: they are never split.
func (l Limits) RecordBound() int {
	l = l.withDefaults()
	return l.MaxMembers*maxMemberEntry + l.DevicesCap*maxIDField + maxFixedFields
}

// Validate checks that l keeps every record within MaxRecordBytes.
func (l Limits) Validate() error {
	if l.DevicesCap < 0 || l.Horizon < 0 || l.MaxMembers < 0 {
		return fmt.Errorf("occupancy: negative limits %+v", l)
	}
	if b := l.RecordBound(); b > MaxRecordBytes {
		return fmt.Errorf("occupancy: limits %+v allow records of %d bytes, above the bound of %d", l.withDefaults(), b, MaxRecordBytes)
	}
	return nil
}

// Result says what Apply did with a trigger.
type Result int

// Results of Apply.
const (
	// Applied: the trigger's HLC was above the member's last; the member now
	// reflects it (its inside flag may or may not have changed).
	Applied Result = iota
	// Duplicate: a re-delivery of the member's last applied trigger (same
	// trigger_id, HLC not above last_hlc). Only duplicates_dropped changed.
	Duplicate
	// Stale: an older trigger overtaken by one already applied (or a replay of
	// an earlier trigger). Only stale_dropped changed.
	Stale
	// Invalid: the trigger fails Validate for this fence; nothing changed.
	Invalid
	// Expired: the record does not hold the device and the trigger's HLC is
	// not above pruned_hlc: it may belong to a stay the record has forgotten
	// (a replay older than the horizon), so it is dropped. Only
	// expired_dropped (and the watermark) changed.
	Expired
	// Forward: the record is split and does not hold the device; the trigger
	// belongs to the part PartKey names. occ changed only when changed is true
	// (it was just split, or pruned).
	Forward
)

var resultNames = [...]string{Applied: "applied", Duplicate: "duplicate", Stale: "stale", Invalid: "invalid", Expired: "expired", Forward: "forward"}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Invalid-trigger errors (the processor dead-letters such triggers with the
// reason).
var (
	ErrNoFence        = errors.New("trigger has no fence_id")
	ErrNoTriggerID    = errors.New("trigger has no trigger_id")
	ErrNoHLC          = errors.New("trigger has no HLC")
	ErrDeviceMismatch = errors.New("device_id differs from the record key")
	ErrFenceMismatch  = errors.New("fence_id differs from the record key")
	ErrUnknownType    = errors.New("unknown trigger type")
	ErrLongTriggerID  = fmt.Errorf("trigger_id is longer than %d bytes", MaxTriggerIDBytes)
)

// Validate checks a trigger read from fence-triggers against its record key
// (the device id): fence_id and trigger_id set and usable, device_id equal to
// the key, a non-zero HLC and a known type.
func Validate(deviceKey string, t *geofencepb.Trigger) error {
	if err := validate(t); err != nil {
		return err
	}
	if t.GetDeviceId() != deviceKey {
		return fmt.Errorf("%w: key %q, device_id %q", ErrDeviceMismatch, deviceKey, t.GetDeviceId())
	}
	return nil
}

// validateLooped checks a trigger read back from the loop topic, keyed by its
// fence or by one of the fence's salted parts.
func validateLooped(key string, t *geofencepb.Trigger) error {
	if err := validate(t); err != nil {
		return err
	}
	if _, ok := partID(key, t.GetFenceId()); !ok {
		return fmt.Errorf("%w: key %q, fence_id %q", ErrFenceMismatch, key, t.GetFenceId())
	}
	return nil
}

func validate(t *geofencepb.Trigger) error {
	switch {
	case t.GetFenceId() == "":
		return ErrNoFence
	case t.GetTriggerId() == "":
		return ErrNoTriggerID
	case len(t.GetTriggerId()) > MaxTriggerIDBytes:
		return ErrLongTriggerID
	case t.GetHlc() == 0:
		return ErrNoHLC
	}
	switch t.GetType() {
	case geofencepb.TriggerType_TRIGGER_TYPE_ENTER, geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerType_TRIGGER_TYPE_DWELL:
	default:
		return fmt.Errorf("%w: %v", ErrUnknownType, t.GetType())
	}
	// fence_id becomes the key of the loop topic and of the table.
	if err := topology.ValidateKey(t.GetFenceId(), 0); err != nil {
		return fmt.Errorf("fence_id: %w", err)
	}
	// device_id becomes a member key; its length is part of the record bound.
	if err := topology.ValidateKey(t.GetDeviceId(), 0); err != nil {
		return fmt.Errorf("%w: device_id: %w", ErrDeviceMismatch, err)
	}
	return nil
}

// Apply applies trigger t to one record of its fence (the fence's own, or a
// salted part's). occ is modified in place and must be non-nil; an empty
// occ.FenceId is set from t. lim bounds the record (zero fields: defaults).
//
// changed reports whether the record's membership changed: a device flipped
// between outside and inside (so count and devices may have moved), members
// past the horizon were pruned, or the record was split. The caller writes
// occ back whenever the result is neither Invalid nor Forward, and on Forward
// only when changed; on Forward it sends t on to PartKey.
//
// count is exact whatever the cap, and the record never holds more than
// lim.MaxMembers members. See the package documentation for the rules.
func Apply(occ *geofencepb.Occupancy, t *geofencepb.Trigger, lim Limits) (changed bool, result Result) {
	if occ.FenceId == "" {
		occ.FenceId = t.GetFenceId()
	}
	if validate(t) != nil || t.GetFenceId() != occ.FenceId {
		return false, Invalid
	}
	lim = lim.withDefaults()
	device := t.GetDeviceId()
	wm := max(occ.WatermarkHlc, t.GetHlc())
	if occ.SaltBuckets > 0 && occ.Members[device] == nil && t.GetHlc() > occ.PrunedHlc {
		// Not this record's device. Only pruning is written: writing the
		// watermark on every forward would rewrite the record per trigger.
		if prune(occ, wm, lim) {
			occ.WatermarkHlc = wm
			return true, Forward
		}
		return false, Forward
	}
	occ.WatermarkHlc = wm
	pruned := prune(occ, wm, lim)
	occ.CatalogueVersion = max(occ.CatalogueVersion, t.GetCatalogueVersion())
	m := occ.Members[device]
	switch {
	case m == nil && t.GetHlc() <= occ.PrunedHlc:
		occ.ExpiredDropped++
		return pruned, Expired
	case m == nil && occ.SaltBuckets > 0: // the device's stay here was pruned just now
		return true, Forward
	case m == nil && len(occ.Members) >= lim.MaxMembers && len(occ.FenceId) <= maxSplittableKey:
		occ.SaltBuckets = SaltBuckets
		return true, Forward
	case m != nil && t.GetHlc() <= m.LastHlc:
		if t.GetHlc() == m.LastHlc && t.GetTriggerId() == m.LastTriggerId {
			occ.DuplicatesDropped++
			return pruned, Duplicate
		}
		occ.StaleDropped++
		return pruned, Stale
	}
	if m == nil {
		m = &geofencepb.Member{}
		if occ.Members == nil {
			occ.Members = map[string]*geofencepb.Member{}
		}
		occ.Members[device] = m
	}
	inside := t.GetType() != geofencepb.TriggerType_TRIGGER_TYPE_EXIT
	if t.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_DWELL {
		occ.DwellsTotal++
	}
	m.LastHlc = t.GetHlc()
	m.LastTriggerId = t.GetTriggerId()
	changed = inside != m.Inside
	if changed {
		m.Inside = inside
		m.SinceMs = t.GetEventTimeMs()
		occ.LastChangeMs = max(occ.LastChangeMs, t.GetEventTimeMs())
		if inside {
			occ.Count++
			occ.EntersTotal++
			addDevice(occ, device, lim.DevicesCap)
		} else {
			occ.Count--
			occ.ExitsTotal++
			removeDevice(occ, device, lim.DevicesCap)
		}
		if occ.Count < 0 || occ.Count > int64(len(occ.Members)) {
			recount(occ, lim.DevicesCap) // only reachable from corrupted state; never go negative
		}
	} else {
		fixDevices(occ, lim.DevicesCap) // cheap when consistent; applies a changed cap
	}
	if !m.Inside {
		if m.LastHlc < cutoff(wm, lim) { // an EXIT already past the horizon leaves nothing to remember
			forget(occ, device, m)
			pruned = true
		} else {
			occ.NextPruneHlc = min(occ.NextPruneHlc, m.LastHlc)
		}
	}
	return changed || pruned, Applied
}

// cutoff is the HLC below which a device that left is forgotten: the
// horizon before the watermark.
func cutoff(wm uint64, lim Limits) uint64 {
	h := hlc.Pack(lim.Horizon.Milliseconds(), 0)
	if wm <= h {
		return 0
	}
	return wm - h
}

// prune forgets the devices that left more than the horizon before wm (both
// in HLC time). Inside devices are never pruned: they are the count. It scans
// the members only when the cutoff has passed next_prune_hlc, so a trigger
// usually costs no scan.
func prune(occ *geofencepb.Occupancy, wm uint64, lim Limits) bool {
	c := cutoff(wm, lim)
	if c <= occ.NextPruneHlc {
		return false
	}
	pruned, next := false, uint64(math.MaxUint64) // no member left: nothing to prune until one leaves
	for id, m := range occ.Members {
		switch {
		case m.GetInside():
		case m.GetLastHlc() < c:
			forget(occ, id, m)
			pruned = true
		default:
			next = min(next, m.GetLastHlc())
		}
	}
	occ.NextPruneHlc = next
	return pruned
}

// forget drops a member and raises pruned_hlc to its last trigger, so a late
// trigger of the forgotten stay is expired rather than applied.
func forget(occ *geofencepb.Occupancy, id string, m *geofencepb.Member) {
	occ.PrunedHlc = max(occ.PrunedHlc, m.GetLastHlc())
	delete(occ.Members, id)
}

// addDevice inserts device into the sorted list, which holds the first
// min(count, cap) inside devices.
func addDevice(occ *geofencepb.Occupancy, device string, cap int) {
	i, found := slices.BinarySearch(occ.Devices, device)
	if !found && (i < len(occ.Devices) || len(occ.Devices) < cap) {
		occ.Devices = slices.Insert(occ.Devices, i, device)
	}
	fixDevices(occ, cap)
}

// removeDevice drops device from the list and, when the cap left inside devices
// out of it, lists the next one (every unlisted inside device sorts after the
// last listed one).
func removeDevice(occ *geofencepb.Occupancy, device string, cap int) {
	i, found := slices.BinarySearch(occ.Devices, device)
	if !found {
		fixDevices(occ, cap)
		return
	}
	occ.Devices = slices.Delete(occ.Devices, i, i+1)
	if int64(len(occ.Devices)) < occ.Count && len(occ.Devices) < cap && len(occ.Devices) > 0 {
		last, next := occ.Devices[len(occ.Devices)-1], ""
		for id, m := range occ.Members {
			if m.GetInside() && id > last && (next == "" || id < next) {
				next = id
			}
		}
		if next != "" {
			occ.Devices = append(occ.Devices, next)
		}
	}
	fixDevices(occ, cap)
}

// fixDevices restores len(devices) == min(count, cap) when it does not hold
// (the cap changed between runs, or the list was emptied by a removal).
func fixDevices(occ *geofencepb.Occupancy, cap int) {
	if len(occ.Devices) > cap {
		occ.Devices = occ.Devices[:cap]
	}
	if len(occ.Devices) != int(min(occ.Count, int64(cap))) {
		occ.Devices = insideDevices(occ, cap)
	}
}

// insideDevices is the sorted list of the first cap inside members.
func insideDevices(occ *geofencepb.Occupancy, cap int) []string {
	var in []string
	for id, m := range occ.Members {
		if m.GetInside() {
			in = append(in, id)
		}
	}
	sort.Strings(in)
	if len(in) > cap {
		in = in[:cap]
	}
	return in
}

// recount rebuilds count and devices from the members.
func recount(occ *geofencepb.Occupancy, cap int) {
	var n int64
	for _, m := range occ.Members {
		if m.GetInside() {
			n++
		}
	}
	occ.Count = n
	occ.Devices = insideDevices(occ, cap)
}

// Inside reports whether device is inside the fence according to occ (one
// record; a split fence's other devices are in its parts, see Total).
func Inside(occ *geofencepb.Occupancy, device string) bool {
	return occ.GetMembers()[device].GetInside()
}
