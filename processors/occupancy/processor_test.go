package occupancy_test

import (
	"context"
	"errors"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

type harness struct {
	t       *testing.T
	tt      *tester.Tester
	changes *tester.QueueTracker
	dlq     *tester.QueueTracker
}

// newHarness runs occupancy's two processors on one Goka tester: a change
// occupancy-members emits is delivered to occupancy before the send returns.
func newHarness(t *testing.T, opts ...occupancy.Opt) *harness {
	t.Helper()
	h := &harness{t: t, tt: tester.New(t)}
	gs, err := occupancy.New(geofence.Topology(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := gs.Processors(context.Background(), cluster.Config{}, group.Tester(h.tt))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(procs))
	for _, p := range procs {
		go func() { done <- p.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range procs {
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		}
	})
	h.changes = h.tt.NewQueueTracker(geofence.TopicOccupancyChanges)
	h.dlq = h.tt.NewQueueTracker(topology.TopicDeadLetter)
	return h
}

// send writes t to fence-triggers keyed by its device, as the debouncer does.
func (h *harness) send(t *geofencepb.Trigger) { h.sendKeyed(t.DeviceId, t) }

func (h *harness) sendKeyed(key string, t *geofencepb.Trigger) {
	h.tt.Consume(geofence.TopicTriggers, key, t)
}

func (h *harness) occ(fence string) *geofencepb.Occupancy {
	h.t.Helper()
	occ, err := group.StateOf[geofencepb.Occupancy](h.tt.TableValue(goka.GroupTable(geofence.GroupOccupancy), fence))
	if err != nil {
		h.t.Fatal(err)
	}
	return occ
}

func (h *harness) device(id string) *geofencepb.DeviceMembership {
	h.t.Helper()
	m, err := group.StateOf[geofencepb.DeviceMembership](h.tt.TableValue(goka.GroupTable(geofence.GroupOccupancyMembers), id))
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) count(fence string) int64 { return h.occ(fence).GetCount() }

func (h *harness) noDeadLetters() {
	h.t.Helper()
	if _, key, _, ok := h.dlq.NextWithHeaders(); ok {
		h.t.Fatalf("unexpected dead letter for %q", key)
	}
}

func TestProcessorSendsChangesKeyedByFence(t *testing.T) {
	h := newHarness(t)
	tr := trig("veh-1", "depot", enter, 10)
	h.send(tr)
	key, v, ok := h.changes.Next()
	if !ok {
		t.Fatal("nothing on occupancy-changes")
	}
	if key != "depot" {
		t.Fatalf("change key %q, want the fence id", key)
	}
	got, ok := v.(*geofencepb.OccupancyChange)
	if !ok || got.DeviceId != "veh-1" || got.FenceId != "depot" || got.Delta != 1 || got.Type != enter || got.Hlc != 10 || got.EventTimeMs != tr.EventTimeMs {
		t.Fatalf("change %v for %v", v, tr)
	}
	if _, _, ok := h.changes.Next(); ok {
		t.Fatal("more than one change for one trigger")
	}
	// Registers are keyed by device, counts by fence.
	if !occupancy.Inside(h.device("veh-1"), "depot") || h.occ("veh-1") != nil || h.device("depot") != nil {
		t.Fatal("state written under the wrong key")
	}
	if h.count("depot") != 1 {
		t.Fatalf("count %d", h.count("depot"))
	}
	// A duplicate sends nothing.
	h.send(trig("veh-1", "depot", enter, 10))
	if _, _, ok := h.changes.Next(); ok {
		t.Fatal("a duplicate trigger sent a change")
	}
	h.noDeadLetters()
}

func TestProcessorCounts(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		t    *geofencepb.Trigger
		want int64
	}{
		{trig("veh-1", "depot", enter, 10), 1},
		{trig("veh-2", "depot", enter, 11), 2},
		{trig("veh-1", "depot", enter, 10), 2},              // duplicate
		{trig("veh-1", "depot", dwell, 12), 2},              // dwell: counted, no flip
		{trig("veh-1", "depot", exit, 13), 1},               // exit
		{trig("veh-1", "depot", enter, 10), 1},              // replay of an earlier trigger
		{trig("veh-1", "depot", exit, 13), 1},               // replay of the last one
		{trigR("veh-1", "depot", exit, timeout, 14), 1},     // TIMEOUT after the device left
		{trig("veh-3", "depot", exit, 21), 1},               // EXIT overtook its ENTER
		{trig("veh-3", "depot", enter, 20), 1},              // ... which then arrives
		{trigR("veh-2", "depot", exit, timeout, 15), 0},     // TIMEOUT closes a stay
		{trigR("veh-2", "depot", exit, timeout, 15), 0},     // duplicate of it
		{trig("veh-2", "yard", enter, 16), 0},               // another fence
		{trigR("veh-2", "yard", exit, fenceDeleted, 17), 0}, // fence deleted
	}
	for i, s := range steps {
		h.send(s.t)
		if got := h.count("depot"); got != s.want {
			t.Fatalf("step %d (%s): count %d, want %d", i, s.t.TriggerId, got, s.want)
		}
	}
	occ := h.occ("depot")
	if occ.EntersTotal != 2 || occ.ExitsTotal != 2 || occ.DwellsTotal != 1 || occ.DuplicatesDropped != 0 {
		t.Fatalf("depot: %v", occ)
	}
	var dups, stale uint64
	for _, d := range []string{"veh-1", "veh-2", "veh-3"} {
		dups += h.device(d).GetDuplicatesDropped()
		stale += h.device(d).GetStaleDropped()
	}
	if dups != 3 || stale != 2 {
		t.Fatalf("duplicates %d stale %d dropped by the registers, want 3 and 2", dups, stale)
	}
	if len(occ.Devices) != 0 {
		t.Fatalf("devices %v", occ.Devices)
	}
	if y := h.occ("yard"); y.GetCount() != 0 || y.GetEntersTotal() != 1 || y.GetExitsTotal() != 1 {
		t.Fatalf("yard: %v", y)
	}
	h.noDeadLetters()
}

func TestProcessorDeadLettersBadTriggers(t *testing.T) {
	h := newHarness(t)
	good := trig("veh-1", "depot", enter, 10)
	bad := []struct {
		key    string
		edit   func(*geofencepb.Trigger)
		reason string
	}{
		{"veh-1", func(t *geofencepb.Trigger) { t.FenceId = "" }, deadletter.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.TriggerId = "" }, deadletter.ReasonInvalid},
		{"veh-2", func(*geofencepb.Trigger) {}, occupancy.ReasonForged}, // device_id is not the key
		{"veh-1", func(t *geofencepb.Trigger) { t.Type = geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED }, deadletter.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.Type = 9 }, deadletter.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.Hlc = 0 }, deadletter.ReasonInvalid},
	}
	for i, b := range bad {
		tr := proto.Clone(good).(*geofencepb.Trigger)
		b.edit(tr)
		h.sendKeyed(b.key, tr)
		hdr, key, v, ok := h.dlq.NextWithHeaders()
		if !ok {
			t.Fatalf("case %d: not dead-lettered", i)
		}
		if key != b.key || string(hdr[deadletter.HeaderReason]) != b.reason || string(hdr[deadletter.HeaderSourceTopic]) != geofence.TopicTriggers {
			t.Fatalf("case %d: dead letter key %q headers %q", i, key, hdr)
		}
		raw, _ := v.([]byte)
		var back geofencepb.Trigger
		if err := proto.Unmarshal(raw, &back); err != nil || !proto.Equal(&back, tr) {
			t.Fatalf("case %d: dead letter does not carry the original value: %v", i, err)
		}
	}
	if _, _, ok := h.changes.Next(); ok {
		t.Fatal("a bad trigger sent a change")
	}
	// The stream goes on.
	h.send(good)
	if h.count("depot") != 1 {
		t.Fatalf("count %d", h.count("depot"))
	}
}

// A record written to occupancy-changes by someone else that is not a
// change a register could have sent — under a key that is not its fence, a
// delta its type does not allow, a source outside fence-triggers — is
// dead-lettered, not applied.
func TestProcessorDeadLettersForeignChanges(t *testing.T) {
	h := newHarness(t)
	good := occupancy.Change(trig("veh-1", "depot", enter, 10), 1, 0, 5)
	bad := []struct {
		key  string
		edit func(*geofencepb.OccupancyChange)
	}{
		{"yard", func(*geofencepb.OccupancyChange) {}},
		{"depot", func(c *geofencepb.OccupancyChange) { c.Delta = 5 }},
		{"depot", func(c *geofencepb.OccupancyChange) { c.Type = exit }},
		{"depot", func(c *geofencepb.OccupancyChange) { c.SourcePartition = 24 }},
		{"depot", func(c *geofencepb.OccupancyChange) { c.SourceOffset = -3 }},
	}
	for i, b := range bad {
		c := proto.Clone(good).(*geofencepb.OccupancyChange)
		b.edit(c)
		h.tt.Consume(geofence.TopicOccupancyChanges, b.key, c)
		hdr, key, _, ok := h.dlq.NextWithHeaders()
		if !ok || key != b.key || string(hdr[deadletter.HeaderSourceTopic]) != geofence.TopicOccupancyChanges || string(hdr[deadletter.HeaderReason]) != deadletter.ReasonInvalid {
			t.Fatalf("case %d: dead letter %v %q %q", i, ok, key, hdr)
		}
	}
	if h.occ("yard") != nil || h.occ("depot") != nil {
		t.Fatal("a foreign change was applied")
	}
	// A change sent again is dropped, not dead-lettered (rule 18: a replay
	// is never dead-lettered).
	h.tt.Consume(geofence.TopicOccupancyChanges, "depot", good)
	h.tt.Consume(geofence.TopicOccupancyChanges, "depot", good)
	if occ := h.occ("depot"); occ.GetCount() != 1 || occ.GetDuplicatesDropped() != 1 {
		t.Fatalf("depot %v", occ)
	}
	h.noDeadLetters()
}

// A device at MaxMembers fences, none of which it left before the trigger,
// cannot take another: the trigger is dead-lettered with the reason, and the
// stream goes on.
func TestProcessorMemberLimit(t *testing.T) {
	h := newHarness(t, occupancy.MaxMembers(2))
	h.send(trig("veh-1", "a", enter, 10))
	h.send(trig("veh-1", "b", enter, 11))
	h.send(trig("veh-1", "c", enter, 12))
	hdr, key, _, ok := h.dlq.NextWithHeaders()
	if !ok || key != "veh-1" || string(hdr[deadletter.HeaderReason]) != occupancy.ReasonMemberLimit || !strings.Contains(string(hdr[deadletter.HeaderError]), "max-members") {
		t.Fatalf("dead letter %v %q %q", ok, key, hdr)
	}
	if h.occ("c") != nil || len(h.device("veh-1").GetFences()) != 2 {
		t.Fatal("the refused trigger changed state")
	}
	h.send(trig("veh-1", "a", exit, 13))
	h.send(trig("veh-1", "c", enter, 14)) // "a" was left before it: forgotten to make room
	if h.count("c") != 1 || h.count("a") != 0 {
		t.Fatalf("a %d c %d", h.count("a"), h.count("c"))
	}
	h.noDeadLetters()
}

func TestProcessorDevicesCap(t *testing.T) {
	h := newHarness(t, occupancy.DevicesCap(2))
	for i, d := range []string{"c", "a", "b"} {
		h.send(trig(d, "depot", enter, uint64(10+i)))
	}
	occ := h.occ("depot")
	// The list fills in arrival order and stays sorted; b came when it was full.
	if occ.Count != 3 || !slices.Equal(occ.Devices, []string{"a", "c"}) {
		t.Fatalf("count %d devices %v", occ.Count, occ.Devices)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := occupancy.New(geofence.Topology(), occupancy.DevicesCap(0)); err == nil {
		t.Error("a zero devices cap was accepted")
	}
	// Bad options are refused together, each by its name.
	_, err := occupancy.New(geofence.Topology(), occupancy.DevicesCap(0), occupancy.Horizon(-1), occupancy.MaxMembers(0))
	for _, want := range []string{"DevicesCap: must be positive", "Horizon: must be positive", "MaxMembers: must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error containing %q, got %v", want, err)
		}
	}
	topo := geofence.Topology()
	topo.Boundaries = nil
	if _, err := occupancy.New(topo); err == nil {
		t.Error("a topology without the declared boundary was accepted")
	}
	topo = geofence.Topology()
	topo.Processors = topo.Processors[:1]
	gs, err := occupancy.New(topo)
	if err == nil {
		_, err = gs.Processors(context.Background(), cluster.Config{}, group.Tester(tester.New(t)))
	}
	if err == nil {
		t.Error("a topology without the occupancy processor was accepted")
	}
}

// TestProcessorProperty runs the property through the real group: triggers
// written to fence-triggers keyed by device, per-(device, fence) order kept,
// with duplicates and replays, end with the ground-truth count per fence.
func TestProcessorProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	h := newHarness(t, occupancy.DevicesCap(3))
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	for round := range rounds {
		prefix := string(rune('a'+round)) + "-"
		sc := genScenario(r, prefix, 2+r.IntN(10), 1+r.IntN(4), 16)
		order := sc.withDuplicatesAndReplays(r, sc.pairOrder(r))
		if round%3 == 2 {
			order = sc.withDuplicatesAndReplays(r, sc.shuffled(r)) // EXITs overtake ENTERs
		}
		for _, tr := range order {
			h.send(tr)
		}
		w := newWorld(occupancy.Limits{DevicesCap: 3})
		for _, d := range sc.devices {
			if m := h.device(d); m != nil {
				w.devices[d] = m
			}
		}
		for _, f := range sc.fences {
			if occ := h.occ(f); occ != nil {
				w.fences[f] = occ
				w.peak[f] = int64(len(sc.devices)) // unknown here: check the list is a subset only
			}
		}
		checkInvariants(t, w)
		compareTruth(t, sc, w, "through the groups")
	}
	h.noDeadLetters()
}

func TestValidateErrorsAreDistinct(t *testing.T) {
	errs := []error{occupancy.ErrNoFence, occupancy.ErrNoTriggerID, occupancy.ErrNoHLC, occupancy.ErrDeviceMismatch, occupancy.ErrFenceMismatch, occupancy.ErrUnknownType, occupancy.ErrBadDelta, occupancy.ErrBadSource}
	for i, a := range errs {
		for j, b := range errs {
			if i != j && errors.Is(a, b) {
				t.Fatalf("%v is %v", a, b)
			}
		}
	}
}

// One catalogue: a trigger for a fence the catalogue has never held is
// dead-lettered (unknown-fence) and creates no occupancy; a fence deleted
// since, or newer than the catalogue has read, is still counted.
func TestUnknownFenceIsDeadLettered(t *testing.T) {
	cat := fences.New()
	depot, err := fences.NewCircleFence("depot", "Depot", 52.5, 13.4, 100, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := fences.NewCircleFence("gone", "Gone", 52.6, 13.4, 100, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Apply(2, []fences.Fence{depot, gone}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cat.Apply(3, nil, []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, occupancy.Catalogue(cat))
	h.send(trig("veh-1", "nowhere", enter, 10)) // catalogue version 3: the catalogue has read that far
	if hdr, key, _, ok := h.dlq.NextWithHeaders(); !ok || key != "veh-1" || string(hdr[deadletter.HeaderReason]) != occupancy.ReasonUnknownFence {
		t.Fatalf("dead letter %q %v %v, want veh-1 with reason unknown-fence", key, hdr, ok)
	}
	if occ := h.occ("nowhere"); occ != nil {
		t.Fatalf("occupancy created for a fence that never existed: %v", occ)
	}
	h.send(trig("veh-1", "depot", enter, 11))
	h.send(trig("veh-2", "gone", enter, 12))
	newer := trig("veh-3", "brand-new", enter, 13)
	newer.CatalogueVersion = 9 // the debouncer saw a fence this catalogue has not read yet
	h.send(newer)
	for _, f := range []string{"depot", "gone", "brand-new"} {
		if occ := h.occ(f); occ.GetCount() != 1 {
			t.Errorf("%s: count %d, want 1", f, occ.GetCount())
		}
	}
	if k, _, ok := h.dlq.NextRaw(); ok {
		t.Errorf("unexpected dead letter for %q", k)
	}
}

// A trigger written straight to fence-triggers whose id is not the one the
// debouncer derives from its device, fence, type and HLC is dead-lettered as
// forged and moves no count (issue 17: "forged-1" put veh-0001 inside
// park-tiergarten for good).
func TestProcessorDeadLettersForgedTriggers(t *testing.T) {
	h := newHarness(t)
	forged := trig("veh-0001", "park-tiergarten", enter, 10)
	forged.TriggerId = "forged-1"
	otherFence := trig("veh-0001", "depot", enter, 11)
	otherFence.FenceId = "park-tiergarten" // the id names depot
	otherHLC := trig("veh-0001", "park-tiergarten", enter, 12)
	otherHLC.Hlc = 13
	for i, tr := range []*geofencepb.Trigger{forged, otherFence, otherHLC} {
		h.send(tr)
		hdr, key, _, ok := h.dlq.NextWithHeaders()
		if !ok {
			t.Fatalf("case %d: not dead-lettered", i)
		}
		if key != "veh-0001" || string(hdr[deadletter.HeaderReason]) != occupancy.ReasonForged || !strings.Contains(string(hdr[deadletter.HeaderError]), "trigger_id") {
			t.Fatalf("case %d: dead letter key %q headers %q", i, key, hdr)
		}
	}
	if _, _, ok := h.changes.Next(); ok {
		t.Fatal("a forged trigger sent a change")
	}
	if n := h.count("park-tiergarten"); n != 0 {
		t.Fatalf("forged triggers moved the count to %d", n)
	}
	// The genuine trigger still counts.
	h.send(trig("veh-0001", "park-tiergarten", enter, 20))
	if n := h.count("park-tiergarten"); n != 1 {
		t.Fatalf("count %d", n)
	}
	h.noDeadLetters()
}
