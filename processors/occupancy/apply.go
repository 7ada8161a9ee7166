package occupancy

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
)

// DefaultDevicesCap is how many inside devices an Occupancy lists when Apply
// is given a cap ≤ 0.
const DefaultDevicesCap = 100

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
)

var resultNames = [...]string{Applied: "applied", Duplicate: "duplicate", Stale: "stale", Invalid: "invalid"}

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

// validateLooped checks a trigger read back from the loop topic, keyed by fence.
func validateLooped(fenceKey string, t *geofencepb.Trigger) error {
	if err := validate(t); err != nil {
		return err
	}
	if t.GetFenceId() != fenceKey {
		return fmt.Errorf("%w: key %q, fence_id %q", ErrFenceMismatch, fenceKey, t.GetFenceId())
	}
	if t.GetDeviceId() == "" {
		return fmt.Errorf("%w: device_id is empty", ErrDeviceMismatch)
	}
	return nil
}

func validate(t *geofencepb.Trigger) error {
	switch {
	case t.GetFenceId() == "":
		return ErrNoFence
	case t.GetTriggerId() == "":
		return ErrNoTriggerID
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
	return nil
}

// Apply applies trigger t to the occupancy of its fence. occ is modified in
// place and must be non-nil; an empty occ.FenceId is set from t.
//
// changed reports whether the membership changed (a device flipped between
// outside and inside, so count and devices may have moved). Every result
// except Invalid modifies occ (at least a counter or a member's last_hlc), so
// the caller writes occ back whenever the result is not Invalid.
//
// cap bounds occ.Devices (≤ 0 means DefaultDevicesCap); count is exact
// whatever the cap. See the package documentation for the rules.
func Apply(occ *geofencepb.Occupancy, t *geofencepb.Trigger, cap int) (changed bool, result Result) {
	if occ.FenceId == "" {
		occ.FenceId = t.GetFenceId()
	}
	if validate(t) != nil || t.GetFenceId() != occ.FenceId || t.GetDeviceId() == "" {
		return false, Invalid
	}
	if cap <= 0 {
		cap = DefaultDevicesCap
	}
	occ.CatalogueVersion = max(occ.CatalogueVersion, t.GetCatalogueVersion())

	device := t.GetDeviceId()
	m := occ.Members[device]
	if m != nil && t.GetHlc() <= m.LastHlc {
		if t.GetHlc() == m.LastHlc && t.GetTriggerId() == m.LastTriggerId {
			occ.DuplicatesDropped++
			return false, Duplicate
		}
		occ.StaleDropped++
		return false, Stale
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
	if inside == m.Inside {
		fixDevices(occ, cap) // cheap when consistent; applies a changed cap
		return false, Applied
	}
	m.Inside = inside
	m.SinceMs = t.GetEventTimeMs()
	occ.LastChangeMs = max(occ.LastChangeMs, t.GetEventTimeMs())
	if inside {
		occ.Count++
		occ.EntersTotal++
		addDevice(occ, device, cap)
	} else {
		occ.Count--
		occ.ExitsTotal++
		removeDevice(occ, device, cap)
	}
	if occ.Count < 0 || occ.Count > int64(len(occ.Members)) {
		recount(occ, cap) // only reachable from corrupted state; never go negative
	}
	return true, Applied
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

// Inside reports whether device is inside the fence according to occ.
func Inside(occ *geofencepb.Occupancy, device string) bool {
	return occ.GetMembers()[device].GetInside()
}
