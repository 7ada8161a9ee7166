package hlc

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

// FuzzPack: packing keeps the order of wall times (a later device time never
// yields a smaller HLC, which the audit would judge stale), round-trips every
// wall time the 48-bit field can hold and clamps the others.
func FuzzPack(f *testing.F) {
	f.Add(int64(1_700_000_000_123), uint16(42), int64(1_700_000_000_124), uint16(0))
	f.Add(int64(0), uint16(0), int64(-1), uint16(65535))
	f.Add(int64(1<<48-1), uint16(65535), int64(1<<48), uint16(0))
	f.Add(int64(math.MaxInt64), uint16(1), int64(math.MinInt64), uint16(1))
	f.Fuzz(func(t *testing.T, w1 int64, l1 uint16, w2 int64, l2 uint16) {
		a, b := Pack(w1, l1), Pack(w2, l2)
		if w1 < w2 && Wall(a) > Wall(b) || w1 == w2 && (l1 < l2) != (a < b) {
			t.Fatalf("Pack(%d, %d) = %d and Pack(%d, %d) = %d: order lost", w1, l1, a, w2, l2, b)
		}
		if Wall(a) != min(max(w1, 0), MaxWall) || Logical(a) != l1 {
			t.Fatalf("Pack(%d, %d) unpacks to %d/%d", w1, l1, Wall(a), Logical(a))
		}
		if Wall(a) < 0 || Wall(a) > MaxWall || !Time(a).Equal(time.UnixMilli(Wall(a))) {
			t.Fatalf("Wall(%d) = %d", a, Wall(a))
		}
	})
}

// FuzzClock drives a clock with arbitrary wall readings (backwards, frozen,
// far future) and observed remote timestamps: every Now is above everything
// issued or observed before, and never wraps to a small value.
func FuzzClock(f *testing.F) {
	seed := func(ops ...uint64) []byte {
		b := make([]byte, 0, 9*len(ops))
		for i, op := range ops {
			b = append(b, byte(i))
			b = binary.LittleEndian.AppendUint64(b, op)
		}
		return b
	}
	f.Add(seed(1000, 1000, 999, 500, 1001, 2000, 10))
	f.Add(seed(1000, uint64(Pack(5000, 7)), 100, 100))
	f.Add(seed(7, 7, 7, 7, 7, 7))
	f.Add(seed(7, math.MaxUint64, 0, 7, 7, 0)) // Now wrapped to 0 after observing the largest value
	f.Add(seed(uint64(math.MaxInt64), 1<<48, 1<<48-1, 0))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var wall int64
		c := New(func() time.Time { return time.UnixMilli(wall) })
		var floor Timestamp // highest value issued or observed
		for len(ops) >= 9 {
			op, v := ops[0], binary.LittleEndian.Uint64(ops[1:9])
			ops = ops[9:]
			switch op % 3 {
			case 0: // the wall clock moves anywhere, even before 1970
				wall = int64(v)
			case 1:
				c.Observe(v)
				floor = max(floor, v)
				if c.Last() != floor {
					t.Fatalf("Last after Observe(%d) = %d, want %d", v, c.Last(), floor)
				}
			case 2:
				ts := c.Now()
				if ts <= floor && floor < math.MaxUint64 || ts < floor {
					t.Fatalf("Now = %d (wall %d) after %d was issued or observed", ts, Wall(ts), floor)
				}
				floor = ts
			}
		}
	})
}
