package occupancy_test

import (
	"errors"
	"slices"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/occupancy"
)

const (
	enter = geofencepb.TriggerType_TRIGGER_TYPE_ENTER
	exit  = geofencepb.TriggerType_TRIGGER_TYPE_EXIT
	dwell = geofencepb.TriggerType_TRIGGER_TYPE_DWELL

	confirmed    = geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED
	timeout      = geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT
	fenceDeleted = geofencepb.TriggerReason_TRIGGER_REASON_FENCE_DELETED

	baseMs = 1_800_000_000_000
)

// trig builds a trigger the way the debouncer does (same id scheme).
func trig(device, fence string, typ geofencepb.TriggerType, hlc uint64) *geofencepb.Trigger {
	return trigR(device, fence, typ, confirmed, hlc)
}

func trigR(device, fence string, typ geofencepb.TriggerType, reason geofencepb.TriggerReason, hlc uint64) *geofencepb.Trigger {
	return &geofencepb.Trigger{
		TriggerId:        debounce.TriggerID(device, fence, typ, hlc),
		DeviceId:         device,
		FenceId:          fence,
		Type:             typ,
		Reason:           reason,
		EventTimeMs:      baseMs + int64(hlc)*1000,
		Hlc:              hlc,
		CatalogueVersion: 3,
	}
}

// checkInvariants fails the test when occ is internally inconsistent.
func checkInvariants(t *testing.T, occ *geofencepb.Occupancy, cap int) {
	t.Helper()
	var inside []string
	for id, m := range occ.GetMembers() {
		if m.GetInside() {
			inside = append(inside, id)
		}
	}
	sort.Strings(inside)
	switch {
	case occ.GetCount() < 0:
		t.Fatalf("count %d is negative", occ.GetCount())
	case occ.GetCount() != int64(len(inside)):
		t.Fatalf("count %d but %d members inside", occ.GetCount(), len(inside))
	case int64(occ.GetEntersTotal())-int64(occ.GetExitsTotal()) != occ.GetCount():
		t.Fatalf("enters %d - exits %d != count %d", occ.GetEntersTotal(), occ.GetExitsTotal(), occ.GetCount())
	}
	want := inside[:min(len(inside), cap)]
	if !slices.Equal(occ.GetDevices(), want) && !(len(want) == 0 && len(occ.GetDevices()) == 0) {
		t.Fatalf("devices %v, want first %d of inside %v", occ.GetDevices(), cap, inside)
	}
}

type step struct {
	t           *geofencepb.Trigger
	wantResult  occupancy.Result
	wantChanged bool
	wantCount   int64
}

func runSteps(t *testing.T, steps []step) *geofencepb.Occupancy {
	t.Helper()
	occ := &geofencepb.Occupancy{}
	for i, s := range steps {
		changed, res := occupancy.Apply(occ, s.t, occupancy.Limits{})
		if res != s.wantResult || changed != s.wantChanged || occ.Count != s.wantCount {
			t.Fatalf("step %d (%s): got %v changed=%v count=%d, want %v changed=%v count=%d",
				i, s.t.TriggerId, res, changed, occ.Count, s.wantResult, s.wantChanged, s.wantCount)
		}
		checkInvariants(t, occ, occupancy.DefaultDevicesCap)
	}
	return occ
}

func TestApplyEnterExit(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v2", "f", enter, 11), occupancy.Applied, true, 2},
		{trig("v1", "f", exit, 12), occupancy.Applied, true, 1},
		{trig("v1", "f", enter, 13), occupancy.Applied, true, 2},
	})
	if occ.FenceId != "f" || occ.EntersTotal != 3 || occ.ExitsTotal != 1 || !slices.Equal(occ.Devices, []string{"v1", "v2"}) {
		t.Fatalf("got %v", occ)
	}
	if occ.LastChangeMs != baseMs+13_000 || occ.CatalogueVersion != 3 {
		t.Fatalf("last change %d, catalogue %d", occ.LastChangeMs, occ.CatalogueVersion)
	}
	if m := occ.Members["v1"]; !m.Inside || m.LastHlc != 13 || m.SinceMs != baseMs+13_000 || m.LastTriggerId != trig("v1", "f", enter, 13).TriggerId {
		t.Fatalf("member v1 = %v", m)
	}
}

func TestApplyDuplicate(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", enter, 10), occupancy.Duplicate, false, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
	})
	if occ.DuplicatesDropped != 3 || occ.StaleDropped != 0 || occ.EntersTotal != 1 || occ.ExitsTotal != 1 {
		t.Fatalf("got %v", occ)
	}
}

// A replay after a debouncer rebalance re-delivers a device's earlier triggers
// after its later ones: the earlier ones are stale.
func TestApplyReplay(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trig("v1", "f", enter, 10), occupancy.Stale, false, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
	})
	if occ.StaleDropped != 1 || occ.DuplicatesDropped != 1 {
		t.Fatalf("got %v", occ)
	}
}

// An EXIT that overtakes its ENTER across the boundary: the late ENTER is stale.
func TestApplyExitOvertakesEnter(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", exit, 20), occupancy.Applied, false, 0},
		{trig("v1", "f", enter, 10), occupancy.Stale, false, 0},
	})
	if occ.EntersTotal != 0 || occ.ExitsTotal != 0 || occ.Members["v1"].Inside {
		t.Fatalf("got %v", occ)
	}
}

func TestApplyTimeoutAfterExit(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trigR("v1", "f", exit, timeout, 21), occupancy.Applied, false, 0},
		{trigR("v1", "f", exit, fenceDeleted, 22), occupancy.Applied, false, 0},
	})
	if occ.ExitsTotal != 1 {
		t.Fatalf("exits_total %d, want 1 (only flips count)", occ.ExitsTotal)
	}
}

func TestApplyTimeoutAndFenceDeletedExitsClear(t *testing.T) {
	runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v2", "f", enter, 10), occupancy.Applied, true, 2},
		{trigR("v1", "f", exit, timeout, 11), occupancy.Applied, true, 1},
		{trigR("v2", "f", exit, fenceDeleted, 11), occupancy.Applied, true, 0},
	})
}

// DWELL implies inside: when it overtakes its ENTER (or the ENTER is lost), the
// device is still counted, and the late ENTER is stale.
func TestApplyDwell(t *testing.T) {
	occ := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", dwell, 11), occupancy.Applied, false, 1},
		{trig("v2", "f", dwell, 21), occupancy.Applied, true, 2},
		{trig("v2", "f", enter, 20), occupancy.Stale, false, 2},
		{trig("v2", "f", exit, 22), occupancy.Applied, true, 1},
	})
	if occ.DwellsTotal != 2 || occ.EntersTotal != 2 {
		t.Fatalf("got %v", occ)
	}
}

func TestApplyExitOfUnknownDeviceNeverNegative(t *testing.T) {
	runSteps(t, []step{
		{trig("v1", "f", exit, 10), occupancy.Applied, false, 0},
		{trigR("v2", "f", exit, timeout, 10), occupancy.Applied, false, 0},
		{trig("v1", "f", exit, 10), occupancy.Duplicate, false, 0},
	})
}

// Same HLC as the member's last but another id: not the same trigger, and not
// newer, so it is stale.
func TestApplySameHLCOtherID(t *testing.T) {
	runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 10), occupancy.Stale, false, 1},
	})
}

func TestApplyCatalogueVersionIsMax(t *testing.T) {
	occ := &geofencepb.Occupancy{}
	for _, v := range []uint64{4, 9, 2} {
		tr := trig("v1", "f", enter, v)
		tr.CatalogueVersion = v
		occupancy.Apply(occ, tr, occupancy.Limits{})
	}
	if occ.CatalogueVersion != 9 {
		t.Fatalf("catalogue_version %d, want 9", occ.CatalogueVersion)
	}
}

func TestApplyInvalidChangesNothing(t *testing.T) {
	occ := &geofencepb.Occupancy{}
	occupancy.Apply(occ, trig("v1", "f", enter, 10), occupancy.Limits{})
	before := proto.Clone(occ)
	bad := []*geofencepb.Trigger{
		trig("v1", "other", enter, 11),
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED, Hlc: 11},
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: 42, Hlc: 11},
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: exit},
		{DeviceId: "v1", FenceId: "f", Type: exit, Hlc: 11},
		{TriggerId: "x", FenceId: "f", Type: exit, Hlc: 11},
	}
	for _, b := range bad {
		if changed, res := occupancy.Apply(occ, b, occupancy.Limits{}); res != occupancy.Invalid || changed {
			t.Fatalf("%v: got %v changed=%v", b, res, changed)
		}
	}
	if !proto.Equal(before, occ) {
		t.Fatalf("invalid triggers changed state:\n%v\n%v", before, occ)
	}
}

func TestValidate(t *testing.T) {
	good := trig("v1", "f", enter, 10)
	if err := occupancy.Validate("v1", good); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key  string
		edit func(*geofencepb.Trigger)
		want error
	}{
		{"v2", func(*geofencepb.Trigger) {}, occupancy.ErrDeviceMismatch},
		{"v1", func(t *geofencepb.Trigger) { t.FenceId = "" }, occupancy.ErrNoFence},
		{"v1", func(t *geofencepb.Trigger) { t.TriggerId = "" }, occupancy.ErrNoTriggerID},
		{"v1", func(t *geofencepb.Trigger) { t.Hlc = 0 }, occupancy.ErrNoHLC},
		{"v1", func(t *geofencepb.Trigger) { t.Type = 0 }, occupancy.ErrUnknownType},
		{"v1", func(t *geofencepb.Trigger) { t.Type = 7 }, occupancy.ErrUnknownType},
	}
	for _, c := range cases {
		tr := proto.Clone(good).(*geofencepb.Trigger)
		c.edit(tr)
		if err := occupancy.Validate(c.key, tr); !errors.Is(err, c.want) {
			t.Errorf("key %q, %v: got %v, want %v", c.key, tr, err, c.want)
		}
	}
	tr := proto.Clone(good).(*geofencepb.Trigger)
	tr.FenceId = "bad\xff"
	if err := occupancy.Validate("v1", tr); err == nil {
		t.Error("a fence_id that is not valid UTF-8 cannot become a key")
	}
}

// The device list is capped and sorted; count stays exact, and devices the cap
// left out move up when a listed one leaves.
func TestApplyDevicesCap(t *testing.T) {
	const cap = 3
	occ := &geofencepb.Occupancy{}
	hlc := uint64(0)
	apply := func(dev string, typ geofencepb.TriggerType) {
		t.Helper()
		hlc++
		if _, res := occupancy.Apply(occ, trig(dev, "f", typ, hlc), occupancy.Limits{DevicesCap: cap}); res != occupancy.Applied {
			t.Fatalf("%s %v: %v", dev, typ, res)
		}
		checkInvariants(t, occ, cap)
	}
	for _, d := range []string{"d5", "d1", "d3", "d2", "d4"} {
		apply(d, enter)
	}
	if occ.Count != 5 || !slices.Equal(occ.Devices, []string{"d1", "d2", "d3"}) {
		t.Fatalf("got count %d devices %v", occ.Count, occ.Devices)
	}
	apply("d2", exit)
	if !slices.Equal(occ.Devices, []string{"d1", "d3", "d4"}) {
		t.Fatalf("devices %v", occ.Devices)
	}
	apply("d5", exit) // unlisted device leaves
	apply("d1", exit)
	apply("d3", exit)
	if occ.Count != 1 || !slices.Equal(occ.Devices, []string{"d4"}) {
		t.Fatalf("got count %d devices %v", occ.Count, occ.Devices)
	}
	apply("d0", enter)
	if !slices.Equal(occ.Devices, []string{"d0", "d4"}) {
		t.Fatalf("devices %v", occ.Devices)
	}
	// A smaller cap on a later run truncates; a larger one refills.
	for _, d := range []string{"d6", "d7", "d8"} {
		apply(d, enter)
	}
	hlc++
	occupancy.Apply(occ, trig("d0", "f", dwell, hlc), occupancy.Limits{DevicesCap: 2})
	checkInvariants(t, occ, 2)
	hlc++
	occupancy.Apply(occ, trig("d4", "f", dwell, hlc), occupancy.Limits{DevicesCap: 10})
	checkInvariants(t, occ, 10)
}

// Counts come from the members: a corrupted count is repaired, never negative.
func TestApplyRepairsCorruptedCount(t *testing.T) {
	occ := &geofencepb.Occupancy{FenceId: "f", Count: 0, Members: map[string]*geofencepb.Member{
		"v1": {Inside: true, LastHlc: 5},
	}}
	occupancy.Apply(occ, trig("v1", "f", exit, 6), occupancy.Limits{})
	if occ.Count != 0 {
		t.Fatalf("count %d", occ.Count)
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[occupancy.Result]string{occupancy.Applied: "applied", occupancy.Duplicate: "duplicate",
		occupancy.Stale: "stale", occupancy.Invalid: "invalid", 9: "Result(9)"} {
		if r.String() != want {
			t.Errorf("%d: %q", int(r), r.String())
		}
	}
}
