package geofence

import (
	"strconv"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// TriggerID is the deterministic id of a trigger: device|fence|type|hlc (the
// HLC in hex). Its first component is the device id, exactly the partition
// key, so a replay after a rebalance writes the same id and consumers drop the
// duplicate. It lives in the contract package because two processors need it
// and may only share vocabulary, not code: the debouncer writes it, the
// occupancy processor checks that a trigger's id is the one the debouncer
// would have written.
func TriggerID(deviceID, fenceID string, typ geofencepb.TriggerType, hlc uint64) string {
	b := make([]byte, 0, len(deviceID)+len(fenceID)+24)
	b = append(b, deviceID...)
	b = append(b, '|')
	b = append(b, fenceID...)
	b = append(b, '|')
	b = append(b, typeCode(typ))
	b = append(b, '|')
	b = strconv.AppendUint(b, hlc, 16)
	return string(b)
}

func typeCode(t geofencepb.TriggerType) byte {
	switch t {
	case geofencepb.TriggerType_TRIGGER_TYPE_ENTER:
		return 'E'
	case geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
		return 'X'
	case geofencepb.TriggerType_TRIGGER_TYPE_DWELL:
		return 'D'
	case geofencepb.TriggerType_TRIGGER_TYPE_CROSS:
		return 'C'
	}
	return '?'
}
