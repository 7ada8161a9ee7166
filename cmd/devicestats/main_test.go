package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// The binary is the module on the shared processor flags: --help lists them
// and returns flag.ErrHelp (host.Main exits 0 on it).
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := binary().Run(context.Background(), []string{"--help"}, &out, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp\n%s", err, out.String())
	}
	for _, f := range []string{"Counts pings per device and hour", "brokers", "state-dir", "timer-interval", "metrics-addr"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage does not mention %q:\n%s", f, out.String())
		}
	}
}
