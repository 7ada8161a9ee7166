package debounce_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
)

// The debouncer's metrics go to the registry it is given, not to a global
// one: a fresh registry gets every counter, and two debouncers on one
// registry share its collectors instead of failing.
func TestMetricsGoToTheGivenRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.Registerer(reg)); err != nil {
			t.Fatalf("a second debouncer on one registry: %v", err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "fencestream_pings_processed_total", "fencestream_flaps_suppressed_total", "fencestream_stale_pings_total", "fencestream_silence_timers_fired_total":
			n++
		}
	}
	if n != 4 {
		t.Errorf("the given registry holds %d of the debouncer's 4 counters", n)
	}
}
