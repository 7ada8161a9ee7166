package geofence_test

import (
	"fmt"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
)

// The id starts with the device id, the partition key, so a replay writes the
// same id; the HLC is in hex.
func ExampleTriggerID() {
	fmt.Println(geofence.TriggerID("veh-1", "depot", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 255))
	fmt.Println(geofence.TriggerID("veh-1", "depot", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 256))
	// Output:
	// veh-1|depot|E|ff
	// veh-1|depot|X|100
}
