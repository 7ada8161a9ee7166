package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, &out, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"--brokers", "-state-dir", "-hot-standby", "-recover-ahead", "-partitions", "-metrics-addr", "-log-level", "-log-format", "-sasl-mechanism", "-tls"} {
		if !strings.Contains(out.String(), strings.TrimLeft(f, "-")) {
			t.Errorf("usage does not mention %s:\n%s", f, out.String())
		}
	}
}

func TestFlagErrors(t *testing.T) {
	t.Setenv("FENCESTREAM_BROKERS", "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--brokers", "127.0.0.1:1"}, "--state-dir is required"},
		{[]string{"--state-dir", t.TempDir()}, "no brokers given (set --brokers or FENCESTREAM_BROKERS)"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--partitions", "0"}, "--partitions must be between 1 and"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--devices-cap", "-1"}, "--devices-cap must be positive"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--log-level", "loud"}, "--log-level"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--sasl-mechanism", "KERBEROS"}, "unknown SASL mechanism"},
		{[]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "extra"}, "unexpected arguments"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		err := run(context.Background(), c.args, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want error containing %q", c.args, err, c.want)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestRunAndShutdown runs the binary's main loop against an embedded broker,
// scrapes its metrics (the record cache's too: on by default), and stops it
// the way SIGTERM does (context canceled).
// A second run with another partition count is refused with the reason.
func TestRunAndShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t)
	brokers := strings.Join(b.Addrs(), ",")
	metrics := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	logs := &logBuffer{}
	var started sync.Once // once per processor: occupancy-members and occupancy
	go func() {
		done <- run(ctx, []string{"--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "6",
			"--metrics-addr", metrics, "--lag-interval", "100ms", "--log-level", "debug"}, logs, func(*group.Processor) { started.Do(func() { close(ready) }) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run ended before ready: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready within 30s")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		body := scrape(t, "http://"+metrics+"/metrics")
		if strings.Contains(body, `fencestream_occupancy_lag_records{partition="5",topic="occupancy-changes"} 0`) &&
			strings.Contains(body, `fencestream_occupancy_lag_records{partition="5",topic="fence-triggers"} 0`) &&
			strings.Contains(body, `fencestream_occupancy_triggers_total{result="stale"}`) &&
			strings.Contains(body, `fencestream_occupancy_changes_total{result="duplicate"}`) &&
			// The record cache is on by default, and /metrics reports it.
			strings.Contains(body, `fencestream_record_cache_misses_total{group="occupancy"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the lag gauges and the record cache:\n%s\nlogs:\n%s", body, logs)
		}
		time.Sleep(50 * time.Millisecond)
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

	err := run(context.Background(), []string{"--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "24", "--metrics-addr", ""}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "partitions") || !strings.Contains(err.Error(), "declares 24") {
		t.Fatalf("partition mismatch: got %v", err)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // test
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// logBuffer collects the binary's logs for a failure message.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
