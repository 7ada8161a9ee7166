package occupancy_test

import (
	"context"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/hlc"
)

// TestFutureTriggerIsDeadLettered: a consistent trigger (its id matches) whose
// HLC is a year ahead of the clock is dead-lettered future-hlc and changes no
// membership, so the device's real triggers still count. On main
// --max-clock-skew did nothing for occupancy: the trigger was applied and
// held the device at the fence for a year.
func TestFutureTriggerIsDeadLettered(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	h := &harness{t: t, tt: tester.New(t)}
	gs, err := occupancy.New(geofence.Topology())
	if err != nil {
		t.Fatal(err)
	}
	procs, err := gs.Processors(context.Background(), cluster.Config{}, group.Tester(h.tt),
		group.Now(func() time.Time { return now }), group.MaxClockSkew(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, len(procs))
	for _, p := range procs {
		go func() { done <- p.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range procs {
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		}
	}()
	h.changes = h.tt.NewQueueTracker(geofence.TopicOccupancyChanges)
	h.dlq = h.tt.NewQueueTracker(topology.TopicDeadLetter)

	at := func(d time.Duration) uint64 { return hlc.Pack(now.Add(d).UnixMilli(), 0) }
	h.send(trig("veh-1", "depot", enter, at(365*24*time.Hour)))
	headers, key, _, ok := h.dlq.NextWithHeaders()
	if !ok {
		t.Fatal("a trigger a year ahead was not dead-lettered")
	}
	if r := string(headers[deadletter.HeaderReason]); key != "veh-1" || r != deadletter.ReasonFutureHLC {
		t.Fatalf("dead letter key %q reason %q, want veh-1 %s", key, r, deadletter.ReasonFutureHLC)
	}
	if e := string(headers[deadletter.HeaderError]); !strings.Contains(e, "max skew 5m0s") {
		t.Errorf("dead letter error %q does not give the skew", e)
	}
	if _, _, ok := h.changes.Next(); ok {
		t.Fatal("the future trigger sent a change")
	}
	if occupancy.Inside(h.device("veh-1"), "depot") || h.count("depot") != 0 {
		t.Fatalf("the future trigger changed membership: %v, count %d", h.device("veh-1"), h.count("depot"))
	}

	// Within the skew it counts, and the device's real triggers still apply.
	h.send(trig("veh-1", "depot", enter, at(4*time.Minute)))
	if h.count("depot") != 1 {
		t.Fatalf("a trigger within the skew: count %d, want 1", h.count("depot"))
	}
	h.send(trig("veh-1", "depot", exit, at(4*time.Minute+time.Second)))
	if h.count("depot") != 0 || occupancy.Inside(h.device("veh-1"), "depot") {
		t.Fatalf("after the exit: count %d", h.count("depot"))
	}
	h.noDeadLetters()
}
