package versioned_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Test support, as the kit's own tests have it (group_test.go,
// tester_test.go, options_test.go, replay_test.go).

var quiet = slog.New(slog.DiscardHandler)

// exampleT lets Goka's tester run inside an Example.
type exampleT struct{}

func (exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (exampleT) Fatal(a ...any)                    { panic(fmt.Sprint(a...)) }

// runUntilCleanup runs fn in a goroutine until the test ends, then cancels it
// and expects a clean stop within a deadline.
func runUntilCleanup(t *testing.T, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("did not stop within 30s")
		}
	})
}

// commitsUnknown is a CommittedOffsets that never knows a commit.
func commitsUnknown(string, int32) (int64, bool) { return 0, false }

// counterValue sums the counter name over the series carrying labels.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (v float64, found bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, want := range labels {
				if have[k] != want {
					continue series
				}
			}
			v += m.GetCounter().GetValue()
			found = true
		}
	}
	return v, found
}
