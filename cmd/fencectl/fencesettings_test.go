package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/fences"
)

// rowOf returns the listing line of fence id, split into columns.
func rowOf(t *testing.T, out, id string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			return f
		}
	}
	t.Fatalf("no row for %s in\n%s", id, out)
	return nil
}

// The listing shows every fence's effective debounce settings, its own
// marked, and which detector confirms its triggers.
func TestFencesListShowsSettings(t *testing.T) {
	file := writeFile(t, "mixed.geojson", `{"type":"FeatureCollection","features":[`+validFence+`,
	{"type":"Feature","properties":{"id":"gate","radius_m":50,"detector":"strict","min_dwell_s":60,"loiter_s":5400},
	 "geometry":{"type":"Point","coordinates":[13.4,52.5]}}]}`)
	code, out, errs := fencectl(t, "fences", "load", file, "--dry-run")
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "DETECTOR", "SAMPLES", "MIN DWELL", "HYSTERESIS", "LOITER", "TIMEOUT", "* = set by the fence")
	// No overrides: the defaults, unmarked.
	if got, want := strings.Join(rowOf(t, out, "square"), " "), "sprt 3 10s 25 m 5m 10m"; !strings.HasSuffix(got, want) {
		t.Errorf("square: %q, want it to end %q", got, want)
	}
	if got, want := strings.Join(rowOf(t, out, "gate"), " "), "strict* 3 1m* 25 m 1h30m* 10m"; !strings.HasSuffix(got, want) {
		t.Errorf("gate: %q, want it to end %q", got, want)
	}

	// Through the broker: the demo airport's 60 s minimum dwell is visible.
	addr := withTopology(t, 1)
	code, out, errs = fencectl(t, "fences", "load", "--demo", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	if got, want := strings.Join(rowOf(t, out, "airport-ber"), " "), "sprt 3* 1m* 100 m* 30m* 10m"; !strings.HasSuffix(got, want) {
		t.Errorf("airport-ber: %q, want it to end %q", got, want)
	}
	wantContains(t, out, "* = set by the fence", fmt.Sprintf("%d fences", len(fences.Demo())))
}
