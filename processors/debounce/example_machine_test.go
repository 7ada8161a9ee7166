package debounce_test

import (
	"fmt"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
)

// Under the strict rule a vehicle drives into a fence, loiters, and leaves;
// GPS noise near the edge fires nothing, and each trigger needs 3 samples
// whose accuracy circle is wholly on the new side, over 10 s.
func ExampleStep() {
	cfg := debounce.Resolve(debounce.DefaultSettings(), &geofencepb.DebounceSettings{LoiterMs: 60_000, Detector: "strict"})
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	pings := []debounce.Sample{
		{TimeMs: 0, Distance: -40},                 // outside, beyond the 25 m band
		{TimeMs: 5_000, Distance: 3, AccuracyM: 8}, // centre inside, circle straddles: ambiguous
		{TimeMs: 10_000, Distance: 12, AccuracyM: 8},
		{TimeMs: 15_000, Distance: 30, AccuracyM: 8},
		{TimeMs: 20_000, Distance: 45, AccuracyM: 8}, // 3rd sample, 10 s after the 1st: ENTER
		{TimeMs: 50_000, Distance: 60, AccuracyM: 8},
		{TimeMs: 80_000, Distance: 60, AccuracyM: 8}, // 60 s inside: DWELL
		{TimeMs: 90_000, Distance: -10},              // in the hysteresis band: nothing
		{TimeMs: 95_000, Distance: -30},              // beyond the band: EXITING
		{TimeMs: 100_000, Distance: -45},
		{TimeMs: 105_000, Distance: -60}, // 3rd sample over 10 s: EXIT
	}
	var st *geofencepb.FenceState // nil: settled outside
	for _, p := range pings {
		var trs []debounce.Transition
		st, trs = debounce.Step(st, p, cfg)
		for _, tr := range trs {
			fmt.Printf("t=%3ds %v %v\n", p.TimeMs/1000, tr.Type, tr.Reason)
		}
	}
	fmt.Println("state dropped:", st == nil)

	// A device that goes silent while inside is closed by the sweep.
	// lastSeen is the event time of its last ping, now the sweep's clock.
	st = &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_INSIDE, InsideSinceMs: 200_000}
	lastSeen, now := int64(260_000), int64(260_000)+cfg.SilenceTimeout.Milliseconds()
	st, tr, ok := debounce.Timeout(st, lastSeen, now, cfg)
	fmt.Println(tr.Type, tr.Reason, ok, "state dropped:", st == nil)
	// Output:
	// t= 20s TRIGGER_TYPE_ENTER TRIGGER_REASON_CONFIRMED
	// t= 80s TRIGGER_TYPE_DWELL TRIGGER_REASON_CONFIRMED
	// t=105s TRIGGER_TYPE_EXIT TRIGGER_REASON_CONFIRMED
	// state dropped: true
	// TRIGGER_TYPE_EXIT TRIGGER_REASON_TIMEOUT true state dropped: true
}
