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

func TestHelpAndFlagErrors(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"brokers", "state-dir", "timer-interval", "storage", "metrics-addr", "record-cache"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage does not mention --%s:\n%s", f, out.String())
		}
	}
	if !strings.Contains(out.String(), "(default 16777216)") {
		t.Errorf("usage does not give --record-cache's default, 16 MiB:\n%s", out.String())
	}
	t.Setenv("FENCESTREAM_BROKERS", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--brokers", "127.0.0.1:1"}, "--state-dir is required"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--timer-interval", "-1s"}, "--timer-interval must be positive"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "stray"}, "unexpected arguments"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--record-cache", "-1"}, "--record-cache must not be negative"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// The binary starts both processors on a broker, says so, and stops cleanly.
func TestRunAndShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	brokers := strings.Join(embeddedtest.Start(t).Addrs(), ",")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &embeddedtest.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "6", "--metrics-addr", ""}, logs, nil)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "visits ready") {
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
	if !strings.Contains(logs.String(), "visits stopped") {
		t.Errorf("no stop message:\n%s", logs)
	}
}
