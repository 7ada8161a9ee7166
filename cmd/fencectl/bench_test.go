package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestBenchScaleReportsEveryFigure runs `fencectl bench scale` small on an
// embedded broker and checks the JSON holds every figure, non-zero where a
// real run cannot make it zero (counts and sizes exact, times only > 0).
func TestBenchScaleReportsEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const devices = 2000
	var out, errb bytes.Buffer
	if code := runBench(ctx, []string{"scale", "--devices", "2000", "--fences", "500", "--idle", "3s", "--partitions", "4"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	num := func(path ...string) float64 {
		t.Helper()
		var cur any = m
		for _, p := range path {
			obj, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %q", path, p)
			}
			if cur, ok = obj[p]; !ok {
				t.Fatalf("%v: missing", path)
			}
		}
		f, ok := cur.(float64)
		if !ok {
			t.Fatalf("%v = %v: not a number", path, cur)
		}
		return f
	}
	if got := num("devices"); got != devices {
		t.Errorf("devices = %v, want %d", got, devices)
	}
	if got := num("catalogue", "fences"); got != 500 {
		t.Errorf("catalogue.fences = %v, want 500", got)
	}
	if got := num("idle", "timers_indexed"); got != devices {
		t.Errorf("idle.timers_indexed = %v, want %d (one pending timer per device)", got, devices)
	}
	// Every part of a seeded envelope is there, and they add up to less
	// than the whole (the magic and the fields' own tags aside).
	parts := num("envelope_bytes", "state") + num("envelope_bytes", "cursors") + num("envelope_bytes", "outputs") + num("envelope_bytes", "timers")
	if total := num("envelope_bytes", "total"); parts > total || total > parts+8 {
		t.Errorf("envelope parts sum to %v, total %v", parts, total)
	}
	for _, p := range [][]string{
		{"cpus"}, {"partitions"}, {"produce_s"}, {"total_s"},
		{"envelope_bytes", "state"}, {"envelope_bytes", "cursors"}, {"envelope_bytes", "outputs"}, {"envelope_bytes", "timers"},
		{"catalogue", "load_s"}, {"catalogue", "update_s"},
		{"recovery", "cold_s"}, {"recovery", "warm_s"}, {"recovery", "disk_mb"}, {"recovery", "restore_records_per_s"},
		{"idle", "s"}, {"idle", "looks"}, {"idle", "cpu_cores"}, {"idle", "look_cpu_us"},
		{"view", "cold_s"}, {"view", "warm_s"},
		{"timers", "interval_s"}, {"timers", "lateness_timers"}, {"timers", "lateness_p50_s"}, {"timers", "lateness_max_s"},
		{"timers", "burst_timers"}, {"timers", "burst_s"}, {"timers", "burst_cpu_s"}, {"timers", "trickle_pings"},
	} {
		if v := num(p...); v <= 0 {
			t.Errorf("%v = %v, want > 0", p, v)
		}
	}
	// Memory deltas can be anything on a busy heap; they need only be there.
	num("recovery", "rss_mb")
	num("recovery", "heap_mb")
	num("catalogue", "heap_mb")
	num("view", "rss_mb")
	// Every seeded timer fires exactly once across the two timer phases, and
	// each phase's figures hang together. The stall is 0 if no ping ever
	// waited a poll long, so it need only be there and not negative.
	if probes, burst := num("timers", "lateness_timers"), num("timers", "burst_timers"); probes+burst != devices {
		t.Errorf("timers: %v probes + %v in the burst, want %d (every device's timer)", probes, burst, devices)
	}
	if p50, mx := num("timers", "lateness_p50_s"), num("timers", "lateness_max_s"); p50 > mx {
		t.Errorf("timers: lateness p50 %v s > max %v s", p50, mx)
	}
	if stall := num("timers", "input_stall_max_s"); stall < 0 {
		t.Errorf("timers.input_stall_max_s = %v, want ≥ 0", stall)
	}
	if got := num("idle", "keys_read"); got != 0 {
		t.Errorf("idle.keys_read = %v: no seeded timer is due, so a look should read no key", got)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
}

// TestBenchRedisRefusesRedisAsTheLocalStore: `bench redis` compares a local
// store with Redis, so --storage redis is a usage error, and without
// redis-server the command fails naming the package to install.
func TestBenchRedisRefusesRedisAsTheLocalStore(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runBench(context.Background(), []string{"redis", "--storage", "redis"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitUsage, errb.String())
	}
	t.Setenv("PATH", t.TempDir())
	errb.Reset()
	if code := runBench(context.Background(), []string{"redis", "--pings", "10"}, &out, &errb); code == exitOK || !bytes.Contains(errb.Bytes(), []byte("redis-server package")) {
		t.Fatalf("exit %d without redis-server\nstderr:\n%s", code, errb.String())
	}
}
