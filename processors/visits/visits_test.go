package visits_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/visits"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// base is 2027-01-15 08:00 UTC; event times in the tests are offsets from it.
var base = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

type harness struct {
	*grouptest.Harness
	t *testing.T
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	// The wall clock is ahead of every event: stream time comes from the data.
	h := &harness{Harness: grouptest.New(t, base.Add(72*time.Hour)), t: t}
	app, err := visits.New(geofence.Topology(), nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range app.Groups() {
		h.Start(g)
	}
	return h
}

// trigger sends a trigger of device for fence at base+at; the same id for
// the same (device, fence, type, at), as the debouncer's replays do.
func (h *harness) trigger(device, fence string, typ geofencepb.TriggerType, at time.Duration) {
	h.consume(geofence.TopicTriggers, device, &geofencepb.Trigger{
		TriggerId: fmt.Sprintf("%s|%s|%d|%d", device, fence, typ, at.Milliseconds()),
		DeviceId:  device, FenceId: fence, Type: typ, Reason: geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED,
		EventTimeMs: base.Add(at).UnixMilli(),
	})
}

// consume feeds m encoded: the app's groups read through the stream DSL,
// whose codecs take the encoded bytes (as a producer writes them).
func (h *harness) consume(topic, key string, m proto.Message) {
	h.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	h.Consume(topic, key, b)
}

func (h *harness) enter(device, fence string, at time.Duration) {
	h.trigger(device, fence, geofencepb.TriggerType_TRIGGER_TYPE_ENTER, at)
}

func (h *harness) exit(device, fence string, at time.Duration) {
	h.trigger(device, fence, geofencepb.TriggerType_TRIGGER_TYPE_EXIT, at)
}

func (h *harness) visits() []string {
	var out []string
	for _, r := range grouptest.Drain[visitspb.Visit](h.Harness, geofence.TopicVisits) {
		vis := r.Value
		if r.Key != vis.DeviceId {
			h.t.Fatalf("visit keyed %q, device %q: fence-visits is keyed by device", r.Key, vis.DeviceId)
		}
		out = append(out, fmt.Sprintf("%s@%s %s-%s %s", vis.DeviceId, vis.FenceId,
			time.UnixMilli(vis.EnteredMs).UTC().Format("15:04"), time.UnixMilli(vis.LeftMs).UTC().Format("15:04"), time.Duration(vis.DurationMs)*time.Millisecond))
	}
	return out
}

// fire runs both groups' due timers.
func (h *harness) fire() { h.FireTimers() }

// hours renders a fence's hours as "HH:MM e=enters v=visits d=mean dwell final".
func (h *harness) hours(fence string) string {
	h.t.Helper()
	st := grouptest.State[visitspb.FenceVisits](h.Harness, geofence.TopicVisitStatsTable, fence)
	hs, err := visits.Hours(st)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, x := range hs {
		out = append(out, fmt.Sprintf("%s e=%d v=%d d=%gs %v", x.Start.Format("15:04"), x.Enters, x.Visits, x.MeanDwellSec, x.Final))
	}
	return strings.Join(out, " | ")
}

func (h *harness) fenceState(fence string) *visitspb.FenceVisits {
	return grouptest.State[visitspb.FenceVisits](h.Harness, geofence.TopicVisitStatsTable, fence)
}

func TestEnterAndExitMakeAVisit(t *testing.T) {
	h := newHarness(t)
	h.enter("car-1", "depot", 5*time.Minute)
	h.exit("car-1", "depot", 35*time.Minute)
	if got := h.visits(); strings.Join(got, ",") != "car-1@depot 08:05-08:35 30m0s" {
		t.Fatalf("visits %v", got)
	}
	if got := h.hours("depot"); got != "08:00 e=1 v=1 d=1800s false" {
		t.Fatalf("hours %s", got)
	}
}

// The debouncer re-emits an EXIT after a crash (same trigger id): it must not
// make a second visit; and an EXIT whose ENTER this group never saw makes none.
func TestExitWithoutEnterAfterReplay(t *testing.T) {
	h := newHarness(t)
	h.enter("car-1", "depot", 5*time.Minute)
	h.exit("car-1", "depot", 35*time.Minute)
	h.exit("car-1", "depot", 35*time.Minute) // replayed: its ENTER is used up
	h.exit("car-2", "depot", 40*time.Minute) // its ENTER predates the group
	if got := h.visits(); strings.Join(got, ",") != "car-1@depot 08:05-08:35 30m0s" {
		t.Fatalf("visits %v, want exactly car-1's", got)
	}
	// A later ENTER/EXIT of the same device pairs normally.
	h.enter("car-2", "depot", 50*time.Minute)
	h.exit("car-2", "depot", 55*time.Minute)
	if got := h.visits(); strings.Join(got, ",") != "car-2@depot 08:50-08:55 5m0s" {
		t.Fatalf("visits %v", got)
	}
}

// Duplicates on either input of the fence-keyed stats (replayed triggers,
// re-emitted visits) are counted once.
func TestDuplicatesCountOnce(t *testing.T) {
	h := newHarness(t)
	h.enter("car-1", "depot", 5*time.Minute)
	h.enter("car-1", "depot", 5*time.Minute)
	h.exit("car-1", "depot", 15*time.Minute)
	vis := &visitspb.Visit{VisitId: fmt.Sprintf("car-1|depot|%d|%d", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, (5 * time.Minute).Milliseconds()),
		DeviceId: "car-1", FenceId: "depot", EnteredMs: base.Add(5 * time.Minute).UnixMilli(), LeftMs: base.Add(15 * time.Minute).UnixMilli(), DurationMs: (10 * time.Minute).Milliseconds()}
	h.consume(geofence.TopicVisits, "car-1", vis) // the same visit again
	if got := h.hours("depot"); got != "08:00 e=1 v=1 d=600s false" {
		t.Fatalf("hours %s, want one ENTER and one visit", got)
	}
}

// An hour closes when stream time passes its end plus the 10-minute grace:
// then it is final, and a record for it is late (counted, dropped).
func TestWindowClosedByStreamTimeAndLateRecord(t *testing.T) {
	h := newHarness(t)
	h.enter("car-1", "depot", 10*time.Minute)
	h.enter("car-2", "depot", 65*time.Minute) // stream time 09:05: 08:00 still takes records
	h.fire()
	h.enter("car-3", "depot", 55*time.Minute) // out of order, within grace
	if got := h.hours("depot"); got != "08:00 e=2 v=0 d=0s false | 09:00 e=1 v=0 d=0s false" {
		t.Fatalf("hours %s", got)
	}
	h.enter("car-4", "yard", 71*time.Minute) // another fence on the loop moves stream time to 09:11
	h.fire()
	if got := h.hours("depot"); got != "08:00 e=2 v=0 d=0s true | 09:00 e=1 v=0 d=0s false" {
		t.Fatalf("after the close: %s", got)
	}
	h.enter("car-5", "depot", 50*time.Minute) // beyond grace
	if got := h.hours("depot"); got != "08:00 e=2 v=0 d=0s true | 09:00 e=1 v=0 d=0s false" {
		t.Fatalf("a late ENTER changed the closed hour: %s", got)
	}
	if late := h.fenceState("depot").GetEnters().GetLate(); late != 1 {
		t.Fatalf("late count %d, want 1", late)
	}
	// After 24 hours of stream time the hour leaves the state.
	h.enter("car-6", "depot", 25*time.Hour+11*time.Minute)
	h.fire()
	if got := h.hours("depot"); strings.HasPrefix(got, "08:00") {
		t.Fatalf("retention: %s", got)
	}
}

// A visit not under its device's key cannot be re-keyed by fence with
// trust: visit-rekey dead-letters it as invalid, and the stats do not
// count it.
func TestMalformedVisitDeadLettered(t *testing.T) {
	h := newHarness(t)
	h.consume(geofence.TopicVisits, "car-2", &visitspb.Visit{VisitId: "v1", DeviceId: "car-1", FenceId: "depot",
		EnteredMs: base.UnixMilli(), LeftMs: base.Add(time.Minute).UnixMilli(), DurationMs: time.Minute.Milliseconds()})
	dls := grouptest.DeadLetters(h.Harness)
	if len(dls) != 1 || dls[0].Key != "car-2" || dls[0].Reason != deadletter.ReasonInvalid {
		t.Fatalf("dead letters %+v, want car-2's visit as %s", dls, deadletter.ReasonInvalid)
	}
	if st := h.fenceState("depot"); st != nil {
		t.Fatalf("depot's stats %v, want none", st)
	}
}
