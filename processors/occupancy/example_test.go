package occupancy_test

import (
	"fmt"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/occupancy"
)

// A trigger is applied to its device's member register at its fence
// (ApplyTrigger); what that did to the fence's count goes on as a change,
// which the fence's record adds up unless it has it already (ApplyChange).
func ExampleApplyTrigger() {
	devices := map[string]*geofencepb.DeviceMembership{}
	depot := &geofencepb.Occupancy{}
	offset := int64(0) // of the trigger in its fence-triggers partition
	apply := func(device string, typ geofencepb.TriggerType, hlc uint64) {
		t := &geofencepb.Trigger{
			TriggerId: geofence.TriggerID(device, "depot", typ, hlc),
			DeviceId:  device, FenceId: "depot", Type: typ, Hlc: hlc,
		}
		if devices[device] == nil {
			devices[device] = &geofencepb.DeviceMembership{}
		}
		delta, send, res := occupancy.ApplyTrigger(devices[device], t, occupancy.Limits{})
		offset++
		if send {
			occupancy.ApplyChange(depot, occupancy.Change(t, delta, 0, offset), occupancy.Limits{})
		}
		fmt.Printf("%-5s %-18s %-9s delta=%-2d count=%d devices=%v\n", device, typ, res, delta, depot.Count, depot.Devices)
	}
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 10)
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20)
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 10) // re-delivered
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 25)
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20) // replayed after its EXIT
	apply("bike", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 31) // overtook its ENTER
	apply("bike", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 30)
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 40)

	// A change sent twice (occupancy-members crashed after sending it) is
	// dropped by its source offset.
	again := occupancy.Change(&geofencepb.Trigger{DeviceId: "truck", FenceId: "depot", Type: geofencepb.TriggerType_TRIGGER_TYPE_EXIT, Hlc: 40}, -1, 0, offset)
	fmt.Println(occupancy.ApplyChange(depot, again, occupancy.Limits{}), "count", depot.Count)
	fmt.Println("enters", depot.EntersTotal, "exits", depot.ExitsTotal)
	// Output:
	// truck TRIGGER_TYPE_ENTER applied   delta=1  count=1 devices=[truck]
	// van   TRIGGER_TYPE_ENTER applied   delta=1  count=2 devices=[truck van]
	// truck TRIGGER_TYPE_ENTER duplicate delta=0  count=2 devices=[truck van]
	// van   TRIGGER_TYPE_EXIT  applied   delta=-1 count=1 devices=[truck]
	// van   TRIGGER_TYPE_ENTER stale     delta=0  count=1 devices=[truck]
	// bike  TRIGGER_TYPE_EXIT  applied   delta=0  count=1 devices=[truck]
	// bike  TRIGGER_TYPE_ENTER stale     delta=0  count=1 devices=[truck]
	// truck TRIGGER_TYPE_EXIT  applied   delta=-1 count=0 devices=[]
	// duplicate count 0
	// enters 2 exits 2
}
