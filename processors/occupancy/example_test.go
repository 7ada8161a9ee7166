package occupancy_test

import (
	"fmt"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
)

func ExampleApply() {
	occ := &geofencepb.Occupancy{}
	apply := func(device string, typ geofencepb.TriggerType, hlc uint64) {
		t := &geofencepb.Trigger{
			TriggerId: fmt.Sprintf("%s|depot|%v|%x", device, typ, hlc),
			DeviceId:  device, FenceId: "depot", Type: typ, Hlc: hlc,
		}
		changed, res := occupancy.Apply(occ, t, occupancy.Limits{})
		fmt.Printf("%-5s %-20s %-9s changed=%-5v count=%d devices=%v\n", device, typ, res, changed, occ.Count, occ.Devices)
	}
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 10)
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20)
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 10) // re-delivered
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 25)
	apply("van", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20) // replayed after its EXIT
	apply("bike", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 31) // overtook its ENTER
	apply("bike", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 30)
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 40)
	apply("truck", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 41) // TIMEOUT for a device that left
	fmt.Println("enters", occ.EntersTotal, "exits", occ.ExitsTotal, "duplicates", occ.DuplicatesDropped, "stale", occ.StaleDropped)
	// Output:
	// truck TRIGGER_TYPE_ENTER   applied   changed=true  count=1 devices=[truck]
	// van   TRIGGER_TYPE_ENTER   applied   changed=true  count=2 devices=[truck van]
	// truck TRIGGER_TYPE_ENTER   duplicate changed=false count=2 devices=[truck van]
	// van   TRIGGER_TYPE_EXIT    applied   changed=true  count=1 devices=[truck]
	// van   TRIGGER_TYPE_ENTER   stale     changed=false count=1 devices=[truck]
	// bike  TRIGGER_TYPE_EXIT    applied   changed=false count=1 devices=[truck]
	// bike  TRIGGER_TYPE_ENTER   stale     changed=false count=1 devices=[truck]
	// truck TRIGGER_TYPE_EXIT    applied   changed=true  count=0 devices=[]
	// truck TRIGGER_TYPE_EXIT    applied   changed=false count=0 devices=[]
	// enters 2 exits 2 duplicates 1 stale 2
}
