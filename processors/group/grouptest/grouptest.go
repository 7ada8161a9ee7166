// Package grouptest runs groups and views for tests and stops them when the
// test ends. Harness puts several groups on one Goka tester with one fixed
// clock: feed records, fire timers, drain topics, read typed table state,
// find a key on a given partition. View and Harness.Route build a view or an
// HTTP route on the harness and start it in the same call, before or after
// records were consumed.
//
// Invariant: every processor and view it starts has stopped, and any error
// it returned has failed the test, before t's cleanup finishes; a processor
// that stops, or a view built on the harness's tester but never started,
// fails the test at the next wait instead of hanging it.
package grouptest

import (
	"context"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
)

// RunView runs v until the test ends and returns once it has recovered,
// failing the test if that takes more than a minute. For a view on a
// Harness's tester use View, which also recovers a view started late.
func RunView[M any, PM codecs.Message[M]](t testing.TB, v *group.View[M, PM]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view %s: %v", v.Topic(), err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := v.WaitRecovered(wctx); err != nil {
		t.Fatal(err)
	}
}
