package occupancy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Defaults and fixed bounds of the records (see the package documentation).
const (
	// DefaultDevicesCap is how many inside devices a fence's record lists.
	DefaultDevicesCap = 100
	// DefaultHorizon is how long, in HLC time, a device's record remembers a
	// fence the device left.
	DefaultHorizon = 24 * time.Hour
	// DefaultMaxMembers is how many fences one device's record holds: the
	// fences it is inside plus those it left within the horizon; the oldest
	// left one is forgotten first when it is full.
	DefaultMaxMembers = 64
	// MaxRecordBytes is the stated bound of a record of either table, well
	// below Kafka's 1 MB default message limit. New refuses Limits whose
	// worst case (RecordBound) exceeds it.
	MaxRecordBytes = 256 << 10
	// MaxTriggerIDBytes is the longest trigger_id accepted: the debouncer's
	// ids (device|fence|type|hlc) of the longest keys fit.
	MaxTriggerIDBytes = 2*topology.MaxKeyBytes + 32
	// MaxSourcePartitions bounds the partitions of fence-triggers a fence's
	// record keeps a source offset for (topology.MaxPartitions would do;
	// this is what the record bound is computed with).
	MaxSourcePartitions = 1024
)

// Limits are what the records are held to. Zero fields take their defaults.
type Limits struct {
	// DevicesCap bounds the devices a fence's record lists (default
	// DefaultDevicesCap).
	DevicesCap int
	// Horizon is how long after its last trigger (in the triggers' HLC time)
	// a device's record still remembers a fence it left (default
	// DefaultHorizon).
	Horizon time.Duration
	// MaxMembers is how many fences a device's record holds (default
	// DefaultMaxMembers).
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
// whose ids are as long as the key rules allow: a map entry holds an id and
// a Member (inside, last_hlc, since_ms, last_type; last_trigger_id only in
// records written before occupancy-members); varints are at most 10 bytes;
// a length prefix below 16 KiB is at most 2.
const (
	maxIDField     = 1 + 2 + topology.MaxKeyBytes
	maxVarintField = 1 + 10
	maxMemberBytes = 2 + 3*maxVarintField
	maxMemberEntry = 1 + 2 + maxIDField + (1 + 2 + maxMemberBytes)
	maxOffsetEntry = 10 // a packed varint
	maxFixedFields = maxIDField + 16*maxVarintField
)

// RecordBound is the largest a record of either table can encode to under
// l, whatever the history: a device's with MaxMembers members, or a fence's
// with DevicesCap listed devices and a source offset per partition, every
// id at its longest.
func (l Limits) RecordBound() int {
	l = l.withDefaults()
	return max(l.MaxMembers*maxMemberEntry, l.DevicesCap*maxIDField+MaxSourcePartitions*maxOffsetEntry) + maxFixedFields
}

// Validate checks that l keeps every record within MaxRecordBytes.
func (l Limits) Validate() error {
	if l.DevicesCap < 0 || l.Horizon < 0 || l.MaxMembers < 0 {
		return fmt.Errorf("negative limits %+v", l)
	}
	if b := l.RecordBound(); b > MaxRecordBytes {
		return fmt.Errorf("limits %+v allow records of %d bytes, above the bound of %d", l.withDefaults(), b, MaxRecordBytes)
	}
	return nil
}

// Result says what a record did with a trigger or a change.
type Result int

// Results of ApplyTrigger and ApplyChange.
const (
	// Applied: the trigger's HLC was above the member's last, and the member
	// now reflects it (its inside flag may or may not have changed); or the
	// change was new to the fence's record and is in its count.
	Applied Result = iota
	// Duplicate: a re-delivery of the member's last applied trigger (same
	// type and HLC), or a change the fence's record has applied already (its
	// source offset is not above the last applied from its partition).
	// Only duplicates_dropped changed.
	Duplicate
	// Stale: an older trigger overtaken by one already applied (or a replay of
	// an earlier trigger). Only stale_dropped changed.
	Stale
	// Invalid: the trigger or change fails validation for this record;
	// nothing changed.
	Invalid
	// Expired: the device's record does not hold the fence and the
	// trigger's HLC is not above pruned_hlc: it may belong to a stay the
	// record has forgotten (a replay older than the horizon), so it is
	// dropped. Only expired_dropped (and the watermark) changed.
	Expired
	// Full: the device's record holds MaxMembers fences, none of them left
	// before this trigger, and the trigger is for another fence. Nothing
	// changed; the processor dead-letters it (reason member-limit).
	Full
	// Ignored: a CROSS trigger (the device passed the fence between two
	// fixes): it says nothing about membership. Nothing changed.
	Ignored
)

var resultNames = [...]string{Applied: "applied", Duplicate: "duplicate", Stale: "stale", Invalid: "invalid", Expired: "expired", Full: "full", Ignored: "ignored"}

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
	case geofencepb.TriggerType_TRIGGER_TYPE_ENTER, geofencepb.TriggerType_TRIGGER_TYPE_EXIT, geofencepb.TriggerType_TRIGGER_TYPE_DWELL,
		geofencepb.TriggerType_TRIGGER_TYPE_CROSS:
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

// ApplyTrigger applies trigger t to its device's record m (non-nil; an empty
// m.DeviceId is set from t): to the device's Member at t's fence, last
// writer by HLC wins. lim bounds the record (zero fields: defaults).
//
// It reports what that did to the fence's count: delta is +1 when the device
// went inside, -1 when it left, 0 otherwise; send is whether the fence's
// record must hear of it (a flip, or a DWELL, which the fence counts). The
// caller writes m back unless the result is Invalid or Full. See the package
// documentation for the rules.
func ApplyTrigger(m *geofencepb.DeviceMembership, t *geofencepb.Trigger, lim Limits) (delta int32, send bool, res Result) {
	if m.DeviceId == "" {
		m.DeviceId = t.GetDeviceId()
	}
	if validate(t) != nil || t.GetDeviceId() != m.DeviceId {
		return 0, false, Invalid
	}
	if t.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_CROSS {
		return 0, false, Ignored
	}
	lim = lim.withDefaults()
	fence, at := t.GetFenceId(), t.GetHlc()
	mem := MemberOf(m, fence)
	switch {
	case mem == nil && at <= m.PrunedHlc:
		m.WatermarkHlc = max(m.WatermarkHlc, at)
		m.ExpiredDropped++
		return 0, false, Expired
	case mem != nil && at <= mem.LastHlc:
		if at == mem.LastHlc && t.GetType() == mem.LastType {
			m.DuplicatesDropped++
			return 0, false, Duplicate
		}
		m.StaleDropped++
		return 0, false, Stale
	case mem == nil && len(m.Fences) >= lim.MaxMembers && !forgetOldest(m, at):
		return 0, false, Full
	}
	m.WatermarkHlc = max(m.WatermarkHlc, at)
	prune(m, lim)
	if mem = MemberOf(m, fence); mem == nil { // new, or just pruned (older than at)
		mem = addMember(m, fence)
	}
	inside := t.GetType() != geofencepb.TriggerType_TRIGGER_TYPE_EXIT
	mem.LastHlc, mem.LastType, mem.LastTriggerId = at, t.GetType(), ""
	if inside != mem.Inside {
		mem.Inside, mem.SinceMs = inside, t.GetEventTimeMs()
		delta = -1
		if inside {
			delta = 1
		}
	}
	if !mem.Inside {
		if at < cutoff(m.WatermarkHlc, lim) { // an EXIT already past the horizon leaves nothing to remember
			forget(m, fence, mem)
		} else {
			m.NextPruneHlc = min(m.NextPruneHlc, at)
		}
	}
	return delta, delta != 0 || t.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_DWELL, Applied
}

// cutoff is the HLC below which a fence the device left is forgotten: the
// horizon before the watermark.
func cutoff(wm uint64, lim Limits) uint64 {
	h := hlc.Pack(lim.Horizon.Milliseconds(), 0)
	if wm <= h {
		return 0
	}
	return wm - h
}

// prune forgets the fences the device left more than the horizon before its
// watermark (both in HLC time). Fences it is inside are never pruned: they
// are counted. It scans the members only when the cutoff has passed
// next_prune_hlc, so a trigger usually costs no scan.
func prune(m *geofencepb.DeviceMembership, lim Limits) {
	c := cutoff(m.WatermarkHlc, lim)
	if c <= m.NextPruneHlc {
		return
	}
	next := uint64(math.MaxUint64) // no member left: nothing to prune until one leaves
	m.Fences = slices.DeleteFunc(m.Fences, func(mem *geofencepb.Member) bool {
		switch {
		case mem.GetInside():
		case mem.GetLastHlc() < c:
			m.PrunedHlc = max(m.PrunedHlc, mem.GetLastHlc())
			return true
		default:
			next = min(next, mem.GetLastHlc())
		}
		return false
	})
	m.NextPruneHlc = next
}

// forgetOldest makes room in a full record by forgetting the fence the
// device left longest ago, if it left it before HLC at (a fence left at at
// itself is kept: another trigger of the same ping may still be on its way,
// and pruned_hlc at at would expire it). It reports whether it made room.
func forgetOldest(m *geofencepb.DeviceMembership, at uint64) bool {
	var om *geofencepb.Member
	for _, mem := range m.Fences { // sorted by fence: the first of equals goes
		if !mem.GetInside() && mem.GetLastHlc() < at && (om == nil || mem.GetLastHlc() < om.GetLastHlc()) {
			om = mem
		}
	}
	if om == nil {
		return false
	}
	forget(m, om.GetFenceId(), om)
	return true
}

// forget drops a member and raises pruned_hlc to its last trigger, so a late
// trigger of the forgotten stay is expired rather than applied.
func forget(m *geofencepb.DeviceMembership, fence string, mem *geofencepb.Member) {
	m.PrunedHlc = max(m.PrunedHlc, mem.GetLastHlc())
	if i, found := findMember(m, fence); found {
		m.Fences = slices.Delete(m.Fences, i, i+1)
	}
}

// findMember is where fence's member is, or would be, in m's sorted list.
func findMember(m *geofencepb.DeviceMembership, fence string) (int, bool) {
	return slices.BinarySearchFunc(m.GetFences(), fence, func(mem *geofencepb.Member, f string) int { return strings.Compare(mem.GetFenceId(), f) })
}

// MemberOf is the device's member at fence in record m, or nil.
func MemberOf(m *geofencepb.DeviceMembership, fence string) *geofencepb.Member {
	if i, found := findMember(m, fence); found {
		return m.Fences[i]
	}
	return nil
}

// addMember inserts a new member for fence (which m does not hold).
func addMember(m *geofencepb.DeviceMembership, fence string) *geofencepb.Member {
	i, _ := findMember(m, fence)
	mem := &geofencepb.Member{FenceId: fence}
	m.Fences = slices.Insert(m.Fences, i, mem)
	return mem
}

// Inside reports whether the device of record m is inside fence.
func Inside(m *geofencepb.DeviceMembership, fence string) bool {
	return MemberOf(m, fence).GetInside()
}

// Change is the count change a trigger read at (partition, offset) of
// fence-triggers made, as sent to its fence's record.
func Change(t *geofencepb.Trigger, delta int32, partition int32, offset int64) *geofencepb.OccupancyChange {
	return &geofencepb.OccupancyChange{
		FenceId: t.GetFenceId(), DeviceId: t.GetDeviceId(), Delta: delta, Type: t.GetType(),
		Hlc: t.GetHlc(), EventTimeMs: t.GetEventTimeMs(),
		CatalogueVersion: t.GetCatalogueVersion(), SourcePartition: partition, SourceOffset: offset,
	}
}

// Change-validation errors (the processor dead-letters such changes).
var (
	ErrBadDelta  = errors.New("change's delta does not follow from its trigger type")
	ErrBadSource = errors.New("change's source partition or offset is out of range")
)

// ValidateChange checks a change read from occupancy-changes against its
// record key (the fence id) and the partitions of fence-triggers: ids
// usable, an HLC, a delta its type allows (ENTER +1, EXIT -1, DWELL 0 or +1:
// a DWELL whose ENTER was overtaken puts the device inside) and a source
// within fence-triggers.
func ValidateChange(fenceKey string, c *geofencepb.OccupancyChange, partitions int32) error {
	if c.GetFenceId() == "" {
		return ErrNoFence
	}
	if c.GetHlc() == 0 {
		return ErrNoHLC
	}
	if err := topology.ValidateKey(c.GetFenceId(), 0); err != nil {
		return fmt.Errorf("fence_id: %w", err)
	}
	if err := topology.ValidateKey(c.GetDeviceId(), 0); err != nil {
		return fmt.Errorf("%w: device_id: %w", ErrDeviceMismatch, err)
	}
	if c.GetFenceId() != fenceKey {
		return fmt.Errorf("%w: key %q, fence_id %q", ErrFenceMismatch, fenceKey, c.GetFenceId())
	}
	ok := false
	switch c.GetType() {
	case geofencepb.TriggerType_TRIGGER_TYPE_ENTER:
		ok = c.GetDelta() == 1
	case geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
		ok = c.GetDelta() == -1
	case geofencepb.TriggerType_TRIGGER_TYPE_DWELL:
		ok = c.GetDelta() == 0 || c.GetDelta() == 1
	}
	if !ok {
		return fmt.Errorf("%w: %s with delta %d", ErrBadDelta, c.GetType(), c.GetDelta())
	}
	if p := c.GetSourcePartition(); p < 0 || p >= partitions || p >= MaxSourcePartitions || c.GetSourceOffset() < 0 {
		return fmt.Errorf("%w: partition %d (fence-triggers has %d), offset %d", ErrBadSource, p, partitions, c.GetSourceOffset())
	}
	return nil
}

// ApplyChange applies change c to its fence's record occ (non-nil; an empty
// occ.FenceId is set from c), unless occ has applied it already: a change at
// or below the last source offset occ applied from c's partition is a
// Duplicate (sent again after occupancy-members crashed or moved). lim.
// DevicesCap bounds the list of devices. The caller writes occ back unless
// the result is Invalid.
//
// count moves by the change's delta alone, so it is exact when every change
// reaches the record once; devices lists inside devices in id order while
// there is room (a device that entered while the list was full is listed if
// its DWELL finds room), so it is every device inside as long as count has
// stayed within the cap.
func ApplyChange(occ *geofencepb.Occupancy, c *geofencepb.OccupancyChange, lim Limits) Result {
	if occ.FenceId == "" {
		occ.FenceId = c.GetFenceId()
	}
	if c.GetFenceId() != occ.FenceId || c.GetDelta() < -1 || c.GetDelta() > 1 || c.GetSourcePartition() < 0 || c.GetSourcePartition() >= MaxSourcePartitions || c.GetSourceOffset() < 0 {
		return Invalid
	}
	p, off := int(c.GetSourcePartition()), c.GetSourceOffset()
	if p < len(occ.SourceNext) && off < occ.SourceNext[p] {
		occ.DuplicatesDropped++
		return Duplicate
	}
	if p >= len(occ.SourceNext) {
		occ.SourceNext = append(occ.SourceNext, make([]int64, p+1-len(occ.SourceNext))...)
	}
	occ.SourceNext[p] = off + 1
	lim = lim.withDefaults()
	occ.CatalogueVersion = max(occ.CatalogueVersion, c.GetCatalogueVersion())
	occ.WatermarkHlc = max(occ.WatermarkHlc, c.GetHlc())
	device := c.GetDeviceId()
	switch c.GetDelta() {
	case 1:
		occ.Count++
		occ.EntersTotal++
		occ.LastChangeMs = max(occ.LastChangeMs, c.GetEventTimeMs())
		listDevice(occ, device, lim.DevicesCap)
	case -1:
		occ.Count = max(occ.Count-1, 0) // only a record written before occupancy-members can be short
		occ.ExitsTotal++
		occ.LastChangeMs = max(occ.LastChangeMs, c.GetEventTimeMs())
		if i, found := slices.BinarySearch(occ.Devices, device); found {
			occ.Devices = slices.Delete(occ.Devices, i, i+1)
		}
	}
	if c.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_DWELL {
		occ.DwellsTotal++
		listDevice(occ, device, lim.DevicesCap)
	}
	if len(occ.Devices) > lim.DevicesCap { // the cap was lowered between runs
		occ.Devices = occ.Devices[:lim.DevicesCap]
	}
	return Applied
}

// listDevice inserts an inside device into the sorted list if there is room.
func listDevice(occ *geofencepb.Occupancy, device string, cap int) {
	if int64(len(occ.Devices)) >= occ.Count || len(occ.Devices) >= cap {
		return
	}
	if i, found := slices.BinarySearch(occ.Devices, device); !found {
		occ.Devices = slices.Insert(occ.Devices, i, device)
	}
}
