package occupancy_test

import (
	"context"
	"errors"
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
	t    *testing.T
	tt   *tester.Tester
	loop *tester.QueueTracker
	dlq  *tester.QueueTracker
}

func newHarness(t *testing.T, opts ...occupancy.Opt) *harness {
	t.Helper()
	h := &harness{t: t, tt: tester.New(t)}
	g, err := occupancy.New(geofence.Topology(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(h.tt))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	})
	h.loop = h.tt.NewQueueTracker(geofence.TopicOccupancyLoop)
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

func (h *harness) count(fence string) int64 { return h.occ(fence).GetCount() }

func (h *harness) noDeadLetters() {
	h.t.Helper()
	if _, key, _, ok := h.dlq.NextWithHeaders(); ok {
		h.t.Fatalf("unexpected dead letter for %q", key)
	}
}

func TestProcessorLoopsBackKeyedByFence(t *testing.T) {
	h := newHarness(t)
	tr := trig("veh-1", "depot", enter, 10)
	h.send(tr)
	key, v, ok := h.loop.Next()
	if !ok {
		t.Fatal("nothing on the loop topic")
	}
	if key != "depot" {
		t.Fatalf("loop key %q, want the fence id", key)
	}
	if got, ok := v.(*geofencepb.Trigger); !ok || !proto.Equal(got, tr) {
		t.Fatalf("loop value %v, want %v", v, tr)
	}
	if _, _, ok := h.loop.Next(); ok {
		t.Fatal("more than one record looped back")
	}
	// The table is keyed by fence, not by device.
	if h.occ("veh-1") != nil {
		t.Fatal("state written under the device key")
	}
	if h.count("depot") != 1 {
		t.Fatalf("count %d", h.count("depot"))
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
		{trig("veh-1", "depot", dwell, 12), 2},              // dwell: no change
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
	if occ.DuplicatesDropped != 3 || occ.StaleDropped != 2 || occ.EntersTotal != 2 || occ.ExitsTotal != 2 || occ.DwellsTotal != 1 {
		t.Fatalf("depot: %v", occ)
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
		{"veh-1", func(t *geofencepb.Trigger) { t.FenceId = "" }, group.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.TriggerId = "" }, group.ReasonInvalid},
		{"veh-2", func(*geofencepb.Trigger) {}, occupancy.ReasonForged}, // device_id is not the key
		{"veh-1", func(t *geofencepb.Trigger) { t.Type = geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED }, group.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.Type = 9 }, group.ReasonInvalid},
		{"veh-1", func(t *geofencepb.Trigger) { t.Hlc = 0 }, group.ReasonInvalid},
	}
	for i, b := range bad {
		tr := proto.Clone(good).(*geofencepb.Trigger)
		b.edit(tr)
		h.sendKeyed(b.key, tr)
		hdr, key, v, ok := h.dlq.NextWithHeaders()
		if !ok {
			t.Fatalf("case %d: not dead-lettered", i)
		}
		if key != b.key || string(hdr[group.HeaderReason]) != b.reason || string(hdr[group.HeaderSourceTopic]) != geofence.TopicTriggers {
			t.Fatalf("case %d: dead letter key %q headers %q", i, key, hdr)
		}
		raw, _ := v.([]byte)
		var back geofencepb.Trigger
		if err := proto.Unmarshal(raw, &back); err != nil || !proto.Equal(&back, tr) {
			t.Fatalf("case %d: dead letter does not carry the original value: %v", i, err)
		}
	}
	if _, _, ok := h.loop.Next(); ok {
		t.Fatal("a bad trigger was looped back")
	}
	// The stream goes on.
	h.send(good)
	if h.count("depot") != 1 {
		t.Fatalf("count %d", h.count("depot"))
	}
}

// A record written to the loop topic by someone else, under a key that is not
// its fence, is dead-lettered, not applied to the wrong fence.
func TestProcessorDeadLettersForeignLoopRecords(t *testing.T) {
	h := newHarness(t)
	h.tt.Consume(geofence.TopicOccupancyLoop, "yard", trig("veh-1", "depot", enter, 10))
	hdr, key, _, ok := h.dlq.NextWithHeaders()
	if !ok || key != "yard" || string(hdr[group.HeaderSourceTopic]) != geofence.TopicOccupancyLoop {
		t.Fatalf("dead letter %v %q %q", ok, key, hdr)
	}
	if h.occ("yard") != nil || h.occ("depot") != nil {
		t.Fatal("foreign loop record applied")
	}
}

func TestProcessorDevicesCap(t *testing.T) {
	h := newHarness(t, occupancy.WithDevicesCap(2))
	for i, d := range []string{"c", "a", "b"} {
		h.send(trig(d, "depot", enter, uint64(10+i)))
	}
	occ := h.occ("depot")
	if occ.Count != 3 || !slices.Equal(occ.Devices, []string{"a", "b"}) {
		t.Fatalf("count %d devices %v", occ.Count, occ.Devices)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := occupancy.New(geofence.Topology(), occupancy.WithDevicesCap(0)); err == nil {
		t.Error("a zero devices cap was accepted")
	}
	topo := geofence.Topology()
	topo.Boundaries = nil
	if _, err := occupancy.New(topo); err == nil {
		t.Error("a topology without the declared boundary was accepted")
	}
	topo = geofence.Topology()
	topo.Processors = topo.Processors[:1]
	g, err := occupancy.New(topo)
	if err == nil {
		_, err = g.Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)))
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
	h := newHarness(t, occupancy.WithDevicesCap(3))
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
		occs := map[string]*geofencepb.Occupancy{}
		for _, f := range sc.fences {
			if occ := h.occ(f); occ != nil {
				occs[f] = occ
				checkInvariants(t, occ, 3)
			}
		}
		compareTruth(t, sc, occs, "through the group")
	}
	h.noDeadLetters()
}

func TestValidateErrorsAreDistinct(t *testing.T) {
	errs := []error{occupancy.ErrNoFence, occupancy.ErrNoTriggerID, occupancy.ErrNoHLC, occupancy.ErrDeviceMismatch, occupancy.ErrFenceMismatch, occupancy.ErrUnknownType}
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
	h := newHarness(t, occupancy.WithCatalogue(cat))
	h.send(trig("veh-1", "nowhere", enter, 10)) // catalogue version 3: the catalogue has read that far
	if hdr, key, _, ok := h.dlq.NextWithHeaders(); !ok || key != "veh-1" || string(hdr[group.HeaderReason]) != occupancy.ReasonUnknownFence {
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

// A trigger written straight to fence-triggers (or the loop topic) whose id is
// not the one the debouncer derives from its device, fence, type and HLC is
// dead-lettered as forged and moves no count (issue 17: "forged-1" put
// veh-0001 inside park-tiergarten for good).
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
		if key != "veh-0001" || string(hdr[group.HeaderReason]) != occupancy.ReasonForged || !strings.Contains(string(hdr[group.HeaderError]), "trigger_id") {
			t.Fatalf("case %d: dead letter key %q headers %q", i, key, hdr)
		}
	}
	if _, _, ok := h.loop.Next(); ok {
		t.Fatal("a forged trigger was looped back")
	}
	// Straight onto the loop topic, keyed by the fence.
	h.tt.Consume(geofence.TopicOccupancyLoop, "park-tiergarten", forged)
	if hdr, _, _, ok := h.dlq.NextWithHeaders(); !ok || string(hdr[group.HeaderReason]) != occupancy.ReasonForged {
		t.Fatalf("forged loop record: dead letter %v %q", ok, hdr)
	}
	if n := h.count("park-tiergarten"); n != 0 {
		t.Fatalf("forged triggers moved the count to %d", n)
	}
	// The genuine trigger still counts.
	h.send(trig("veh-0001", "park-tiergarten", enter, 20))
	h.noDeadLetters()
}
