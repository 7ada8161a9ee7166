package retry_test

import (
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/retry"
)

// TestBackoffDoublesCappedWithJitter: each wait is between half and all of
// a step that doubles from First to Max; Reset starts over.
func TestBackoffDoublesCappedWithJitter(t *testing.T) {
	b := retry.Backoff{First: 100 * time.Millisecond, Max: time.Second}
	steps := []time.Duration{100, 200, 400, 800, 1000, 1000}
	distinct := map[time.Duration]bool{}
	for round := range 50 {
		b.Reset()
		for i, step := range steps {
			step *= time.Millisecond
			got := b.Next()
			if got < step/2 || got > step {
				t.Fatalf("round %d wait %d = %v, want within [%v, %v]", round, i, got, step/2, step)
			}
			if i == len(steps)-1 {
				distinct[got] = true
			}
		}
	}
	if len(distinct) < 10 {
		t.Fatalf("capped waits took only %d distinct values in 50 rounds: no jitter", len(distinct))
	}
}

// TestLogLimit lets one line through per interval and counts the others.
func TestLogLimit(t *testing.T) {
	l := retry.LogLimit{Every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if ok, held := l.Allow(t0); !ok || held != 0 {
		t.Fatalf("first: %v %d", ok, held)
	}
	for i := range 1000 {
		if ok, _ := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			t.Fatalf("line %d let through within the interval", i)
		}
	}
	if ok, held := l.Allow(t0.Add(10 * time.Second)); !ok || held != 1000 {
		t.Fatalf("after the interval: %v, %d held back; want true, 1000", ok, held)
	}
}
