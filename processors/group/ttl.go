package group

import (
	"slices"
	"time"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

const ttlTimer = kitTimerPrefix + "ttl"

// expireStates makes the group remove a key's whole table value ttl of
// stream time after its latest input (StateTTL).
func (g *Group[S, PS]) expireStates(ttl time.Duration) {
	g.ttl = ttl
	g.onKitTimer("ttl", func(c *Context[S, PS], _ Timer) error {
		c.rec.purge = true
		return nil
	})
}

// touchTTL moves the key's expiry after an input.
func (g *Group[S, PS]) touchTTL(c *Context[S, PS]) {
	if g.ttl <= 0 || c.Topic() == g.decl.Timers {
		return
	}
	at := c.rec.eventTime
	if at.IsZero() {
		at = c.StreamTime()
	}
	at = at.Add(g.ttl)
	if cur, ok := c.TimerAt(ttlTimer); ok && !at.After(cur.At) {
		return
	}
	if err := c.setTimer(ttlTimer, at, StreamClock); err != nil {
		c.Logger().Error("state TTL not moved", "err", err)
	}
}

// Dedup remembers ids seen within a horizon of event time, in a kitpb.SeenSet
// kept in the key's state: for at-least-once input whose duplicates carry the
// same id. It is bounded twice: ids older than the horizon before the newest
// are forgotten, and at most max ids are kept (the oldest go first). A key
// that stops receiving input is best expired with StateTTL.
type Dedup struct {
	Horizon time.Duration
	Max     int
}

// Seen reports whether id is in set; if not, it records id at event time at
// and prunes the set.
func (d Dedup) Seen(set *kitpb.SeenSet, id string, at time.Time) bool {
	for _, s := range set.GetSeen() {
		if s.GetId() == id {
			return true
		}
	}
	atMs := at.UnixMilli()
	i, _ := slices.BinarySearchFunc(set.Seen, atMs, func(s *kitpb.Seen, t int64) int {
		if s.GetAtMs() <= t {
			return -1
		}
		return 1
	})
	set.Seen = slices.Insert(set.Seen, i, &kitpb.Seen{Id: id, AtMs: atMs})
	newest := set.Seen[len(set.Seen)-1].GetAtMs()
	cut := 0
	for cut < len(set.Seen) && (set.Seen[cut].GetAtMs() < newest-d.Horizon.Milliseconds() || len(set.Seen)-cut > max(d.Max, 1)) {
		cut++
	}
	set.Seen = slices.Delete(set.Seen, 0, cut)
	return false
}
