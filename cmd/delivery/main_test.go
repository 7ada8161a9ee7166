package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// The binary is the module on the shared processor flags and its own:
// --help lists them and returns flag.ErrHelp (host.Main exits 0 on it).
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := binary().Run(context.Background(), []string{"--help"}, &out, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp\n%s", err, out.String())
	}
	for _, f := range []string{"Posts triggers to webhook subscriptions", "brokers", "state-dir", "delivery-attempt-timeout",
		"delivery-max-attempts", "delivery-max-age", "delivery-backoff", "delivery-max-pending", "delivery-endpoint-concurrency",
		"delivery-breaker-failures", "delivery-breaker-cooldown"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage does not mention %q:\n%s", f, out.String())
		}
	}
}

// Bad settings are refused before anything connects, each named.
func TestBadFlags(t *testing.T) {
	var out bytes.Buffer
	err := binary().Run(context.Background(), []string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(),
		"--delivery-max-attempts", "0", "--delivery-backoff", "2s", "--delivery-backoff-max", "1s"}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "MaxAttempts: must be positive") || !strings.Contains(err.Error(), "Backoff: ceiling") {
		t.Fatalf("bad flags: %v\n%s", err, out.String())
	}
}
