package occupancy_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
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
		TriggerId:        geofence.TriggerID(device, fence, typ, hlc),
		DeviceId:         device,
		FenceId:          fence,
		Type:             typ,
		Reason:           reason,
		EventTimeMs:      baseMs + int64(hlc)*1000,
		Hlc:              hlc,
		CatalogueVersion: 3,
	}
}

// world is occupancy's two tables in memory: the member registers by device
// and the fence records, with changes numbered like offsets of one
// fence-triggers partition.
type world struct {
	lim     occupancy.Limits
	devices map[string]*geofencepb.DeviceMembership
	fences  map[string]*geofencepb.Occupancy
	// offsets numbers each source partition's triggers; sent are the
	// changes sent, in order, for tests that send them again.
	offsets [4]int64
	sent    []*geofencepb.OccupancyChange
	// peak is each fence's highest count: its list is complete only while
	// that stayed within the cap.
	peak map[string]int64
}

func newWorld(lim occupancy.Limits) *world {
	return &world{lim: lim, devices: map[string]*geofencepb.DeviceMembership{}, fences: map[string]*geofencepb.Occupancy{}, peak: map[string]int64{}}
}

// apply runs t through both stages, as the processors do.
func (w *world) apply(t *geofencepb.Trigger) (send bool, res occupancy.Result) {
	m := w.devices[t.GetDeviceId()]
	if m == nil {
		m = &geofencepb.DeviceMembership{}
	}
	delta, send, res := occupancy.ApplyTrigger(m, t, w.lim)
	if res != occupancy.Invalid && res != occupancy.Full {
		w.devices[t.GetDeviceId()] = m
	}
	p := int32(topology.PartitionFor(t.GetDeviceId(), int32(len(w.offsets))))
	w.offsets[p]++
	if send {
		c := occupancy.Change(t, delta, p, w.offsets[p])
		w.sent = append(w.sent, c)
		if r := w.change(c); r != occupancy.Applied {
			panic(fmt.Sprintf("a new change was %v", r))
		}
	}
	return send, res
}

// change applies c to its fence's record.
func (w *world) change(c *geofencepb.OccupancyChange) occupancy.Result {
	occ := w.fences[c.GetFenceId()]
	if occ == nil {
		occ = &geofencepb.Occupancy{}
	}
	res := occupancy.ApplyChange(occ, c, w.lim)
	if res != occupancy.Invalid {
		w.fences[c.GetFenceId()] = occ
		w.peak[c.GetFenceId()] = max(w.peak[c.GetFenceId()], occ.GetCount())
	}
	return res
}

func (w *world) occ(fence string) *geofencepb.Occupancy { return w.fences[fence] }

func (w *world) member(device, fence string) *geofencepb.Member {
	return occupancy.MemberOf(w.devices[device], fence)
}

// inside lists the devices whose register says inside fence.
func (w *world) inside(fence string) []string {
	var in []string
	for dev, m := range w.devices {
		if occupancy.Inside(m, fence) {
			in = append(in, dev)
		}
	}
	sort.Strings(in)
	return in
}

// checkInvariants fails the test when the fence records disagree with the
// member registers.
func checkInvariants(t *testing.T, w *world) {
	t.Helper()
	cap := w.lim.DevicesCap
	if cap <= 0 {
		cap = occupancy.DefaultDevicesCap
	}
	for fence, occ := range w.fences {
		inside := w.inside(fence)
		switch {
		case occ.GetCount() != int64(len(inside)):
			t.Fatalf("%s: count %d but %d members inside %v", fence, occ.GetCount(), len(inside), inside)
		case int64(occ.GetEntersTotal())-int64(occ.GetExitsTotal()) != occ.GetCount():
			t.Fatalf("%s: enters %d - exits %d != count %d", fence, occ.GetEntersTotal(), occ.GetExitsTotal(), occ.GetCount())
		case !slices.IsSorted(occ.GetDevices()) || len(slices.Compact(slices.Clone(occ.GetDevices()))) != len(occ.GetDevices()):
			t.Fatalf("%s: devices %v not sorted and unique", fence, occ.GetDevices())
		case len(occ.GetDevices()) > min(len(inside), cap):
			t.Fatalf("%s: %d devices listed, count %d, cap %d", fence, len(occ.GetDevices()), len(inside), cap)
		}
		for _, d := range occ.GetDevices() {
			if _, ok := slices.BinarySearch(inside, d); !ok {
				t.Fatalf("%s: lists %s, which is not inside %v", fence, d, inside)
			}
		}
		if w.peak[fence] <= int64(cap) && !slices.Equal(occ.GetDevices(), inside) && len(inside) > 0 {
			t.Fatalf("%s: count never passed the cap, but lists %v of inside %v", fence, occ.GetDevices(), inside)
		}
	}
}

type step struct {
	t         *geofencepb.Trigger
	wantRes   occupancy.Result
	wantSend  bool
	wantCount int64 // of the step's fence
}

func runSteps(t *testing.T, steps []step) *world {
	t.Helper()
	w := newWorld(occupancy.Limits{})
	for i, s := range steps {
		send, res := w.apply(s.t)
		if res != s.wantRes || send != s.wantSend || w.occ(s.t.FenceId).GetCount() != s.wantCount {
			t.Fatalf("step %d (%s): got %v send=%v count=%d, want %v send=%v count=%d",
				i, s.t.TriggerId, res, send, w.occ(s.t.FenceId).GetCount(), s.wantRes, s.wantSend, s.wantCount)
		}
		checkInvariants(t, w)
	}
	return w
}

func TestApplyEnterExit(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v2", "f", enter, 11), occupancy.Applied, true, 2},
		{trig("v1", "f", exit, 12), occupancy.Applied, true, 1},
		{trig("v1", "f", enter, 13), occupancy.Applied, true, 2},
	})
	occ := w.occ("f")
	if occ.FenceId != "f" || occ.EntersTotal != 3 || occ.ExitsTotal != 1 || !slices.Equal(occ.Devices, []string{"v1", "v2"}) {
		t.Fatalf("got %v", occ)
	}
	if occ.LastChangeMs != baseMs+13_000 || occ.CatalogueVersion != 3 || occ.WatermarkHlc != 13 {
		t.Fatalf("last change %d, catalogue %d, watermark %d", occ.LastChangeMs, occ.CatalogueVersion, occ.WatermarkHlc)
	}
	if m := w.member("v1", "f"); !m.Inside || m.LastHlc != 13 || m.SinceMs != baseMs+13_000 || m.LastType != enter || m.LastTriggerId != "" {
		t.Fatalf("member v1 = %v", m)
	}
	if len(occ.Members) != 0 {
		t.Fatalf("the fence's record holds members: %v", occ.Members)
	}
}

func TestApplyDuplicate(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", enter, 10), occupancy.Duplicate, false, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
	})
	if m := w.devices["v1"]; m.DuplicatesDropped != 3 || m.StaleDropped != 0 {
		t.Fatalf("got %v", m)
	}
	if occ := w.occ("f"); occ.EntersTotal != 1 || occ.ExitsTotal != 1 {
		t.Fatalf("got %v", occ)
	}
}

// A replay after a debouncer rebalance re-delivers a device's earlier triggers
// after its later ones: the earlier ones are stale.
func TestApplyReplay(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trig("v1", "f", enter, 10), occupancy.Stale, false, 0},
		{trig("v1", "f", exit, 20), occupancy.Duplicate, false, 0},
	})
	if m := w.devices["v1"]; m.StaleDropped != 1 || m.DuplicatesDropped != 1 {
		t.Fatalf("got %v", m)
	}
}

// An EXIT that overtakes its ENTER: the late ENTER is stale, and neither
// reaches the fence.
func TestApplyExitOvertakesEnter(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", exit, 20), occupancy.Applied, false, 0},
		{trig("v1", "f", enter, 10), occupancy.Stale, false, 0},
	})
	if w.occ("f") != nil || occupancy.Inside(w.devices["v1"], "f") {
		t.Fatalf("got %v, %v", w.occ("f"), w.devices["v1"])
	}
}

func TestApplyTimeoutAfterExit(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 20), occupancy.Applied, true, 0},
		{trigR("v1", "f", exit, timeout, 21), occupancy.Applied, false, 0},
		{trigR("v1", "f", exit, fenceDeleted, 22), occupancy.Applied, false, 0},
	})
	if w.occ("f").ExitsTotal != 1 {
		t.Fatalf("exits_total %d, want 1 (only flips count)", w.occ("f").ExitsTotal)
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
// device is still counted, and the late ENTER is stale. Every DWELL reaches
// the fence, which counts it.
func TestApplyDwell(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", dwell, 11), occupancy.Applied, true, 1},
		{trig("v2", "f", dwell, 21), occupancy.Applied, true, 2},
		{trig("v2", "f", enter, 20), occupancy.Stale, false, 2},
		{trig("v2", "f", exit, 22), occupancy.Applied, true, 1},
	})
	if occ := w.occ("f"); occ.DwellsTotal != 2 || occ.EntersTotal != 2 {
		t.Fatalf("got %v", occ)
	}
}

func TestApplyExitOfUnknownDeviceNeverNegative(t *testing.T) {
	w := runSteps(t, []step{
		{trig("v1", "f", exit, 10), occupancy.Applied, false, 0},
		{trigR("v2", "f", exit, timeout, 10), occupancy.Applied, false, 0},
		{trig("v1", "f", exit, 10), occupancy.Duplicate, false, 0},
	})
	if w.occ("f") != nil {
		t.Fatalf("exits of devices never inside made a record: %v", w.occ("f"))
	}
}

// Same HLC as the member's last but another type: not the same trigger, and
// not newer, so it is stale.
func TestApplySameHLCOtherType(t *testing.T) {
	runSteps(t, []step{
		{trig("v1", "f", enter, 10), occupancy.Applied, true, 1},
		{trig("v1", "f", exit, 10), occupancy.Stale, false, 1},
	})
}

func TestApplyCatalogueVersionIsMax(t *testing.T) {
	w := newWorld(occupancy.Limits{})
	for i, v := range []uint64{4, 9, 2} {
		typ := enter
		if i%2 == 1 {
			typ = exit
		}
		tr := trig("v1", "f", typ, uint64(10+i))
		tr.CatalogueVersion = v
		w.apply(tr)
	}
	if w.occ("f").CatalogueVersion != 9 {
		t.Fatalf("catalogue_version %d, want 9", w.occ("f").CatalogueVersion)
	}
}

func TestApplyInvalidChangesNothing(t *testing.T) {
	m := &geofencepb.DeviceMembership{}
	occupancy.ApplyTrigger(m, trig("v1", "f", enter, 10), occupancy.Limits{})
	before := proto.Clone(m)
	bad := []*geofencepb.Trigger{
		trig("v2", "f", enter, 11),
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED, Hlc: 11},
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: 42, Hlc: 11},
		{TriggerId: "x", DeviceId: "v1", FenceId: "f", Type: exit},
		{DeviceId: "v1", FenceId: "f", Type: exit, Hlc: 11},
		{TriggerId: "x", DeviceId: "v1", Type: exit, Hlc: 11},
	}
	for _, b := range bad {
		if _, send, res := occupancy.ApplyTrigger(m, b, occupancy.Limits{}); res != occupancy.Invalid || send {
			t.Fatalf("%v: got %v send=%v", b, res, send)
		}
	}
	if !proto.Equal(before, m) {
		t.Fatalf("invalid triggers changed state:\n%v\n%v", before, m)
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

func TestValidateChange(t *testing.T) {
	good := occupancy.Change(trig("v1", "f", enter, 10), 1, 3, 77)
	if err := occupancy.ValidateChange("f", good, 24); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		key  string
		edit func(*geofencepb.OccupancyChange)
		want error
	}{
		{"g", func(*geofencepb.OccupancyChange) {}, occupancy.ErrFenceMismatch},
		{"f", func(c *geofencepb.OccupancyChange) { c.FenceId = "" }, occupancy.ErrNoFence},
		{"f", func(c *geofencepb.OccupancyChange) { c.Hlc = 0 }, occupancy.ErrNoHLC},
		{"f", func(c *geofencepb.OccupancyChange) { c.DeviceId = "" }, occupancy.ErrDeviceMismatch},
		{"f", func(c *geofencepb.OccupancyChange) { c.Delta = -1 }, occupancy.ErrBadDelta},
		{"f", func(c *geofencepb.OccupancyChange) { c.Delta = 2 }, occupancy.ErrBadDelta},
		{"f", func(c *geofencepb.OccupancyChange) { c.Type = exit }, occupancy.ErrBadDelta},
		{"f", func(c *geofencepb.OccupancyChange) { c.Type = 0 }, occupancy.ErrBadDelta},
		{"f", func(c *geofencepb.OccupancyChange) { c.Type, c.Delta = dwell, -1 }, occupancy.ErrBadDelta},
		{"f", func(c *geofencepb.OccupancyChange) { c.SourcePartition = 24 }, occupancy.ErrBadSource},
		{"f", func(c *geofencepb.OccupancyChange) { c.SourcePartition = -1 }, occupancy.ErrBadSource},
		{"f", func(c *geofencepb.OccupancyChange) { c.SourceOffset = -1 }, occupancy.ErrBadSource},
	}
	for _, c := range cases {
		ch := proto.Clone(good).(*geofencepb.OccupancyChange)
		c.edit(ch)
		if err := occupancy.ValidateChange(c.key, ch, 24); !errors.Is(err, c.want) {
			t.Errorf("key %q, %v: got %v, want %v", c.key, ch, err, c.want)
		}
	}
	for _, ok := range []*geofencepb.OccupancyChange{
		occupancy.Change(trig("v1", "f", exit, 10), -1, 0, 0),
		occupancy.Change(trig("v1", "f", dwell, 10), 0, 23, 5),
		occupancy.Change(trig("v1", "f", dwell, 10), 1, 23, 5),
	} {
		if err := occupancy.ValidateChange("f", ok, 24); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

// A change sent again (occupancy-members crashed after sending it, or its
// partition moved) is dropped by its source offset, per source partition,
// whatever arrived from other partitions in between.
func TestApplyChangeDropsResent(t *testing.T) {
	occ := &geofencepb.Occupancy{}
	lim := occupancy.Limits{}
	in := func(dev string, p int32, off int64) *geofencepb.OccupancyChange {
		return occupancy.Change(trig(dev, "f", enter, uint64(100+off)), 1, p, off)
	}
	steps := []struct {
		c    *geofencepb.OccupancyChange
		want occupancy.Result
	}{
		{in("a", 0, 5), occupancy.Applied},
		{in("b", 3, 2), occupancy.Applied},
		{in("a", 0, 5), occupancy.Duplicate}, // the same change again
		{in("c", 0, 4), occupancy.Duplicate}, // below partition 0's last: sent before 5, so applied before it
		{in("c", 3, 9), occupancy.Applied},
		{in("d", 0, 6), occupancy.Applied},
		{in("b", 3, 2), occupancy.Duplicate},
	}
	for i, s := range steps {
		if got := occupancy.ApplyChange(occ, s.c, lim); got != s.want {
			t.Fatalf("step %d (partition %d offset %d): %v, want %v", i, s.c.SourcePartition, s.c.SourceOffset, got, s.want)
		}
	}
	if occ.Count != 4 || occ.DuplicatesDropped != 3 || !slices.Equal(occ.SourceNext, []int64{7, 0, 0, 10}) {
		t.Fatalf("got %v", occ)
	}
	if !slices.Equal(occ.Devices, []string{"a", "b", "c", "d"}) {
		t.Fatalf("devices %v", occ.Devices)
	}
}

// The device list is capped and sorted; count stays exact. A device that
// entered while the list was full is listed when its DWELL finds room.
func TestApplyDevicesCap(t *testing.T) {
	const cap = 3
	w := newWorld(occupancy.Limits{DevicesCap: cap})
	hlc := uint64(0)
	apply := func(dev string, typ geofencepb.TriggerType) {
		t.Helper()
		hlc++
		if _, res := w.apply(trig(dev, "f", typ, hlc)); res != occupancy.Applied {
			t.Fatalf("%s %v: %v", dev, typ, res)
		}
		checkInvariants(t, w)
	}
	for _, d := range []string{"d5", "d1", "d3", "d2", "d4"} {
		apply(d, enter)
	}
	occ := w.occ("f")
	if occ.Count != 5 || !slices.Equal(occ.Devices, []string{"d1", "d3", "d5"}) {
		t.Fatalf("got count %d devices %v", occ.Count, occ.Devices)
	}
	apply("d3", exit)
	if !slices.Equal(occ.Devices, []string{"d1", "d5"}) || occ.Count != 4 {
		t.Fatalf("devices %v count %d", occ.Devices, occ.Count)
	}
	apply("d4", dwell) // room again, and d4 is inside
	if !slices.Equal(occ.Devices, []string{"d1", "d4", "d5"}) {
		t.Fatalf("devices %v", occ.Devices)
	}
	apply("d2", exit) // an unlisted device leaves
	apply("d1", exit)
	apply("d5", exit)
	if occ.Count != 1 || !slices.Equal(occ.Devices, []string{"d4"}) {
		t.Fatalf("got count %d devices %v", occ.Count, occ.Devices)
	}
	apply("d0", enter)
	if !slices.Equal(occ.Devices, []string{"d0", "d4"}) {
		t.Fatalf("devices %v", occ.Devices)
	}
	// A smaller cap on a later run truncates.
	w.lim.DevicesCap = 1
	apply("d6", enter)
	if len(occ.Devices) != 1 {
		t.Fatalf("devices %v with cap 1", occ.Devices)
	}
}

// A device's record is bounded: at MaxMembers fences the one it left longest
// ago is forgotten (and a late trigger of it expired); when every fence held
// is one the device is inside, or left at the trigger's own HLC, the trigger
// is refused (Full) and nothing changes.
func TestApplyMemberLimit(t *testing.T) {
	w := newWorld(occupancy.Limits{MaxMembers: 3})
	w.apply(trig("v", "a", enter, 1))
	w.apply(trig("v", "a", exit, 2))
	w.apply(trig("v", "b", enter, 3))
	w.apply(trig("v", "c", enter, 4))
	if _, res := w.apply(trig("v", "d", enter, 5)); res != occupancy.Applied {
		t.Fatalf("d: %v", res)
	}
	m := w.devices["v"]
	if len(m.Fences) != 3 || occupancy.MemberOf(m, "a") != nil || m.PrunedHlc != 2 {
		t.Fatalf("record %v", m)
	}
	if _, res := w.apply(trig("v", "a", exit, 2)); res != occupancy.Expired {
		t.Fatalf("a late trigger of the forgotten fence: %v", res)
	}
	before := proto.Clone(m)
	if _, send, res := occupancy.ApplyTrigger(m, trig("v", "e", enter, 6), w.lim); res != occupancy.Full || send {
		t.Fatalf("e: %v send=%v", res, send)
	}
	if !proto.Equal(before, m) {
		t.Fatalf("a refused trigger changed the record:\n%v\n%v", before, m)
	}
	checkInvariants(t, w)
}

// Fences a device left more than the horizon before its watermark are
// forgotten; a trigger at or below the forgotten stay is expired.
func TestApplyHorizonPrunes(t *testing.T) {
	w := newWorld(occupancy.Limits{Horizon: time.Hour})
	at := func(ms int64) uint64 { return hlc.Pack(ms, 0) }
	w.apply(trig("v", "a", enter, at(1_000)))
	w.apply(trig("v", "a", exit, at(2_000)))
	w.apply(trig("v", "b", enter, at(3_000)))
	w.apply(trig("v", "b", dwell, at(2*3_600_000)))
	m := w.devices["v"]
	if occupancy.MemberOf(m, "a") != nil || occupancy.MemberOf(m, "b") == nil || m.PrunedHlc != at(2_000) {
		t.Fatalf("record %v", m)
	}
	if _, res := w.apply(trig("v", "a", enter, at(1_000))); res != occupancy.Expired || m.ExpiredDropped != 1 {
		t.Fatalf("a replayed ENTER of the forgotten stay: %v", res)
	}
	if _, res := w.apply(trig("v", "a", enter, at(2*3_600_000+1))); res != occupancy.Applied || w.occ("a").Count != 1 {
		t.Fatalf("a new stay: %v, %v", res, w.occ("a"))
	}
	checkInvariants(t, w)
}

func TestLimitsBound(t *testing.T) {
	if err := (occupancy.Limits{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if b := (occupancy.Limits{}).RecordBound(); b > occupancy.MaxRecordBytes {
		t.Fatalf("default bound %d", b)
	}
	if err := (occupancy.Limits{MaxMembers: 1_000_000}).Validate(); err == nil {
		t.Fatal("a million fences per device fits no record")
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[occupancy.Result]string{occupancy.Applied: "applied", occupancy.Duplicate: "duplicate",
		occupancy.Stale: "stale", occupancy.Invalid: "invalid", occupancy.Expired: "expired", occupancy.Full: "full", 9: "Result(9)"} {
		if r.String() != want {
			t.Errorf("%d: %q", int(r), r.String())
		}
	}
}
