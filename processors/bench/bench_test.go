package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/bench"
	"github.com/fencestream/fencestream/processors/group/statestore"
)

// TestRunReportsEveryFigure runs the whole bench at a small size on an
// embedded broker and checks every figure is there and plausible.
func TestRunReportsEveryFigure(t *testing.T) {
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		Pings: 4_000, Devices: 400, Rates: []int{1_000, 2_000}, Window: time.Second,
		Partitions: 4, Storage: statestore.Pebble, Flush: -1, StateDir: t.TempDir(), Progress: &progress,
		Triggers: 2_000, TriggerDevices: 300,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"a_raw_consumer", "b_goka_counter", "b0_goka_counter_goka_leveldb", "c_debouncer", "d_pipeline", "e_occupancy", "f_dsl_count"} {
		s, ok := m[stage].(map[string]any)
		want := 4_000.0
		if stage == "e_occupancy" {
			want = 2_000
		}
		if !ok || s["pings_per_s"].(float64) <= 0 || s["pings"].(float64) < want {
			t.Errorf("%s = %v", stage, m[stage])
		}
	}
	ratios := m["ratios"].(map[string]any)
	if ratios["c_over_b"].(float64) <= 0 || ratios["d_over_b"].(float64) <= 0 || ratios["d_over_b0"].(float64) <= 0 || ratios["e_over_b0"].(float64) <= 0 ||
		ratios["f_over_b"].(float64) <= 0 || ratios["f_over_b0"].(float64) <= 0 {
		t.Errorf("ratios = %v", ratios)
	}
	if len(res.Rates) != 2 {
		t.Fatalf("rates = %+v", res.Rates)
	}
	// At this size a window may see no fence transition; together they must.
	var triggers, occupancy int
	for _, r := range res.Rates {
		if r.Achieved <= 0 || r.PingToTrigger.P99 < r.PingToTrigger.P50 {
			t.Errorf("rate %d: %+v", r.Offered, r)
		}
		triggers += r.PingToTrigger.N
		occupancy += r.PingToOccupancy.N
	}
	if triggers == 0 || occupancy == 0 {
		t.Errorf("no latency samples: %d triggers, %d occupancy records matched", triggers, occupancy)
	}
	t.Logf("%s", data)
}
