package occupancy_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/occupancy"
)

// TestCrossIsIgnored: a CROSS trigger (the device passed the fence between
// two fixes) is valid, not dead-lettered, and changes no membership: not of
// a device outside, nor of one inside, and no change is sent.
func TestCrossIsIgnored(t *testing.T) {
	mk := func(typ geofencepb.TriggerType, h uint64) *geofencepb.Trigger {
		return &geofencepb.Trigger{TriggerId: geofence.TriggerID("veh", "zone", typ, h), DeviceId: "veh", FenceId: "zone", Type: typ, Hlc: h, EventTimeMs: 1000}
	}
	cross := mk(geofencepb.TriggerType_TRIGGER_TYPE_CROSS, 10)
	if err := occupancy.Validate("veh", cross); err != nil {
		t.Fatalf("Validate(CROSS) = %v, want nil (it must not be dead-lettered)", err)
	}
	m := &geofencepb.DeviceMembership{DeviceId: "veh"}
	if delta, send, res := occupancy.ApplyTrigger(m, cross, occupancy.Limits{}); delta != 0 || send || res != occupancy.Ignored || len(m.Fences) != 0 {
		t.Fatalf("CROSS on an empty record: delta %d send %v result %v, members %v; want 0 false ignored none", delta, send, res, m.Fences)
	}
	if _, _, res := occupancy.ApplyTrigger(m, mk(geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20), occupancy.Limits{}); res != occupancy.Applied {
		t.Fatalf("ENTER: %v", res)
	}
	before := proto.Clone(m)
	if delta, send, res := occupancy.ApplyTrigger(m, mk(geofencepb.TriggerType_TRIGGER_TYPE_CROSS, 30), occupancy.Limits{}); delta != 0 || send || res != occupancy.Ignored {
		t.Fatalf("CROSS while inside: delta %d send %v result %v", delta, send, res)
	}
	if !proto.Equal(before, m) {
		t.Fatalf("CROSS changed the record:\n%v\n%v", before, m)
	}
	if occupancy.Ignored.String() != "ignored" {
		t.Fatalf("Ignored.String() = %q", occupancy.Ignored.String())
	}
}
