package group

import (
	"testing"
	"time"
)

// A partition's clock starts from the stream time its envelopes recorded
// (the due-time index's scan reads it: internal/dueindex), the highest
// restored, whether the clock was created before the restore or after.
func TestStreamTimeIsRestored(t *testing.T) {
	wall := time.UnixMilli(1_000_000)
	c := newStreamClock(time.Minute)
	c.restore(0, 900)
	c.restore(0, 800) // the highest wins
	if got := c.watermark(0); got != 900 {
		t.Fatalf("watermark before the first record %d, want 900", got)
	}
	if got := c.now(0, wall); got != 900 {
		t.Fatalf("stream time at the first look %d, want 900", got)
	}
	c.observe(0, 500, wall) // an older record moves nothing
	if got := c.now(0, wall); got != 900 {
		t.Fatalf("after an older record %d, want 900", got)
	}
	c.observe(1, 100, wall)
	c.restore(1, 700) // a clock created before the restore
	if got := c.now(1, wall); got != 700 {
		t.Fatalf("partition 1: %d, want 700", got)
	}
	if got := c.now(1, wall.Add(59*time.Second)); got != 700 {
		t.Fatalf("partition 1 before its idle time: %d, want 700", got)
	}
}
