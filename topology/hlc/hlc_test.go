package hlc

import (
	"testing"
	"time"
)

func TestClockMonotonicWhenWallClockGoesBackwards(t *testing.T) {
	wall := []int64{1000, 1000, 999, 500, 1001, 1001, 2000, 10}
	i := 0
	c := New(func() time.Time { ms := wall[i%len(wall)]; i++; return time.UnixMilli(ms) })
	var prev Timestamp
	for range 5 * len(wall) {
		ts := c.Now()
		if ts <= prev {
			t.Fatalf("timestamp %d (wall %d logical %d) not above previous %d", ts, Wall(ts), Logical(ts), prev)
		}
		prev = ts
	}
	if Wall(prev) != 2000 {
		t.Fatalf("wall part = %d, want it held at the highest wall seen (2000)", Wall(prev))
	}
}

func TestClockObserveRemote(t *testing.T) {
	c := New(func() time.Time { return time.UnixMilli(100) })
	remote := Pack(5000, 7)
	c.Observe(remote)
	if got := c.Now(); got <= remote {
		t.Fatalf("Now after Observe = %d, want > %d", got, remote)
	}
	c.Observe(Pack(1, 0)) // older remote must not move the clock back
	if got := c.Now(); Wall(got) != 5000 || Logical(got) != 9 {
		t.Fatalf("Now = wall %d logical %d, want 5000/9", Wall(got), Logical(got))
	}
}

func TestLogicalOverflowBorrowsNextMillisecond(t *testing.T) {
	c := New(func() time.Time { return time.UnixMilli(7) })
	var ts Timestamp
	for range logicalMask + 2 {
		ts = c.Now()
	}
	if Wall(ts) != 8 || Logical(ts) != 0 {
		t.Fatalf("after %d ticks in one ms: wall %d logical %d, want 8/0", logicalMask+2, Wall(ts), Logical(ts))
	}
}

func TestPackRoundTrip(t *testing.T) {
	ts := Pack(1_700_000_000_123, 42)
	if Wall(ts) != 1_700_000_000_123 || Logical(ts) != 42 {
		t.Fatalf("round trip: %d/%d", Wall(ts), Logical(ts))
	}
	if !Time(ts).Equal(time.UnixMilli(1_700_000_000_123)) {
		t.Fatal("Time mismatch")
	}
}
