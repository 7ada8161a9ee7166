package hlc

import (
	"math"
	"sync"
	"time"
)

const logicalBits = 16
const logicalMask = 1<<logicalBits - 1

// MaxWall is the largest wall time a Timestamp holds (48 bits of
// milliseconds: the year 10889).
const MaxWall = 1<<(64-logicalBits) - 1

// Timestamp is a packed hybrid logical clock value; it orders as a uint64.
type Timestamp = uint64

// Pack builds a timestamp from wall milliseconds and a logical counter. Wall
// times outside [0, MaxWall] are clamped: shifting them would drop the high
// bits and turn a far-future device time into a tiny, "stale" timestamp.
func Pack(wallMs int64, logical uint16) Timestamp {
	wallMs = min(max(wallMs, 0), MaxWall)
	return uint64(wallMs)<<logicalBits | uint64(logical)
}

// Wall is the physical part in Unix milliseconds.
func Wall(t Timestamp) int64 { return int64(t >> logicalBits) }

// Logical is the counter part.
func Logical(t Timestamp) uint16 { return uint16(t & logicalMask) }

// Time is the physical part as a time.Time.
func Time(t Timestamp) time.Time { return time.UnixMilli(Wall(t)) }

// Clock issues hybrid logical timestamps. The zero value is not usable; use New.
type Clock struct {
	mu   sync.Mutex
	now  func() time.Time
	last Timestamp
}

// New returns a clock reading wall time from now (time.Now when nil). Tests inject
// a clock that stands still or goes backwards.
func New(now func() time.Time) *Clock {
	if now == nil {
		now = time.Now
	}
	return &Clock{now: now}
}

// Now returns a timestamp greater than any returned or observed before.
func (c *Clock) Now() Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = next(c.last, Pack(c.now().UnixMilli(), 0))
	return c.last
}

// Observe merges a timestamp received from elsewhere, so later values exceed it.
func (c *Clock) Observe(remote Timestamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if remote > c.last {
		c.last = remote
	}
}

// Last is the latest timestamp issued or observed.
func (c *Clock) Last() Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// next is the HLC send rule: take the wall clock if it moved ahead, else bump the
// logical counter; on counter overflow borrow the next millisecond. At the
// largest timestamp (only reachable by observing it) it stays there rather
// than wrap to 0, which every consumer would read as "no HLC".
func next(last, wall Timestamp) Timestamp {
	if wall > last {
		return wall
	}
	if last == math.MaxUint64 {
		return last
	}
	return last + 1
}
