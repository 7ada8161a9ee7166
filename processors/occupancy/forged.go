package occupancy

import (
	"errors"
	"fmt"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
)

// ReasonForged is the dead-letter reason of a trigger the debouncer cannot
// have written: its record key, device_id and trigger_id disagree.
const ReasonForged = "forged"

// ErrForged: a trigger's key, device_id and trigger_id do not agree.
var ErrForged = errors.New("trigger is not one the debouncer could have written")

// checkAuthentic refuses a trigger whose id is not the one the debouncer
// derives from its device, fence, type and HLC (geofence.TriggerID), or, when
// deviceKey is given, whose device is not its record key. Anyone who can write
// the topic can still forge a consistent trigger: topic ACLs are the real
// defence (cmd/OPERATING.md); this stops the inconsistent ones, which no debouncer
// writes, from moving a count for good.
func checkAuthentic(deviceKey string, checkKey bool, t *geofencepb.Trigger) error {
	if checkKey && t.GetDeviceId() != deviceKey {
		return fmt.Errorf("%w: record key %q, device_id %q", ErrForged, deviceKey, t.GetDeviceId())
	}
	if want := geofence.TriggerID(t.GetDeviceId(), t.GetFenceId(), t.GetType(), t.GetHlc()); t.GetTriggerId() != want {
		return fmt.Errorf("%w: trigger_id %q, the debouncer's id for device %q, fence %q, type %s, hlc %d is %q",
			ErrForged, t.GetTriggerId(), t.GetDeviceId(), t.GetFenceId(), t.GetType(), t.GetHlc(), want)
	}
	return nil
}
