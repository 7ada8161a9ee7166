package main

import (
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// A module linked into the binary (processors/devicestats, built on the
// public kit only, listed in processors/modules) is described and checked
// like the built-in processors.
func TestRegisteredProcessorInTopology(t *testing.T) {
	code, out, errs := fencectl(t, "topology", "describe")
	wantCode(t, code, exitOK, out, errs)
	for _, w := range []string{devicestats.Table, devicestats.Group + ":", "counts pings per device"} {
		if !strings.Contains(out, w) {
			t.Errorf("describe lacks %q:\n%s", w, out)
		}
	}
	code, out, errs = fencectl(t, "topology", "describe", "--format", "mermaid")
	wantCode(t, code, exitOK, out, errs)
	if !strings.Contains(out, devicestats.Table) {
		t.Errorf("mermaid lacks %s:\n%s", devicestats.Table, out)
	}
	if testing.Short() {
		return
	}
	addr := strings.Join(embeddedtest.Start(t).Addrs(), ",")
	code, out, errs = fencectl(t, "topology", "check", "--create", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	if !strings.Contains(out, devicestats.Table) {
		t.Errorf("check --create did not create %s:\n%s", devicestats.Table, out)
	}
}
