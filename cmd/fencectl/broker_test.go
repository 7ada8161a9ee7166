package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// startBroker runs "fencectl broker" in-process until stop is called, and
// returns the address it printed.
func startBroker(t *testing.T, dir string, extra ...string) (addr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs embeddedtest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"broker", "--data", dir, "--listen", "127.0.0.1:0"}, extra...), &out, &errs)
	}()
	stop = func() int { cancel(); return <-done }
	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasSuffix(out.String(), "\n") {
		select {
		case code := <-done:
			t.Fatalf("broker exited with %d before printing its address:\n%s", code, errs.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no address printed within 30s:\n%s", errs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	addr = strings.TrimSpace(out.String())
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.Contains(addr, "\n") {
		stop()
		t.Fatalf("stdout %q: want one 127.0.0.1:PORT line", out.String())
	}
	if !strings.Contains(errs.String(), "embedded broker listening") {
		t.Errorf("no start log line:\n%s", errs.String())
	}
	return addr, stop
}

// TestBrokerServesAndResumes: the broker prints an address clients can use,
// stops cleanly when its context ends (SIGINT/SIGTERM in main), and a second
// run over the same data directory still holds what the first one stored.
func TestBrokerServesAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	addr, stop := startBroker(t, dir)
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err = kadm.NewClient(kc).CreateTopic(ctx, 1, 1, nil, "t"); err == nil {
		err = kc.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("kept")}).FirstErr()
	}
	kc.Close()
	if err != nil {
		stop()
		t.Fatal(err)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("broker exit %d after its context ended, want 0", code)
	}

	addr, stop = startBroker(t, dir)
	defer stop()
	kc, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	fs := kc.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "kept" {
		t.Fatalf("after a restart over the same --data: %d records, want the one stored", len(recs))
	}
}

// TestBrokerWithoutItsUsersRefusesToStart: "fencectl broker" over a data
// directory served with --sasl-user, run again without it, exits non-zero
// saying how to go on; on main it started and accepted anyone.
func TestBrokerWithoutItsUsersRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	_, stop := startBroker(t, dir, "--sasl-user", "SCRAM-SHA-256:alice:s3cret")
	if code := stop(); code != exitOK {
		t.Fatalf("broker exit %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errs embeddedtest.SyncBuffer
	code := run(ctx, []string{"broker", "--data", dir, "--listen", "127.0.0.1:0"}, &out, &errs)
	if code == exitOK || out.String() != "" {
		t.Fatalf("restart without --sasl-user: exit %d, stdout %q; want a refusal", code, out.String())
	}
	for _, want := range []string{"required SASL", dir, "--sasl-user", "--drop-sasl"} {
		if !strings.Contains(errs.String(), want) {
			t.Errorf("stderr %q does not say %q", errs.String(), want)
		}
	}
	_, stop = startBroker(t, dir, "--drop-sasl")
	if code := stop(); code != exitOK {
		t.Fatalf("broker with --drop-sasl: exit %d", code)
	}
}
