package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
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

// The binary runs both groups alone against a broker (the embedded one here,
// as `go run ./cmd/fencectl broker` gives), reports both ready, and stops
// cleanly when its context ends.
func TestRunsAloneAgainstABroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	brokers := strings.Join(embeddedtest.Start(t).Addrs(), ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &embeddedtest.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- binary().Run(ctx, []string{"--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "6", "--metrics-addr", ""}, logs, nil)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "devicestats ready") || !strings.Contains(logs.String(), "fleetstats ready") {
		select {
		case err := <-done:
			t.Fatalf("run ended before ready: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 60s:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond) // polling the log, bounded by the deadline
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("graceful stop returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop within 30s")
	}
}
