package group

import (
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// The scan that builds a partition's timer index reads each envelope's
// stream time too (field 6), without decoding the rest, and keeps the
// highest; a partition's clock starts from it, whether it was created before
// the restore or after.
func TestStreamTimeIsReadFromTheEnvelopesAndRestored(t *testing.T) {
	b, err := encodeEnvelope(&kitpb.Envelope{State: []byte("s"), HasState: true, StreamMs: 1234,
		Timers: []*kitpb.Timer{{Name: "a", AtMs: 20, Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}})
	if err != nil {
		t.Fatal(err)
	}
	due, ok, ms, err := envelopeScan(b)
	if err != nil || !ok || due[0] != 20 || ms != 1234 {
		t.Fatalf("due %v ok %v stream %d err %v; want 20, true, 1234", due, ok, ms, err)
	}

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
