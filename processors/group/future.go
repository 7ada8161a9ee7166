package group

import (
	"fmt"
	"time"
)

// CheckFuture is the group's future-hlc check for a handler whose stream is
// not OrderedByHLC (occupancy orders per (fence, device), so one device's
// triggers may share an HLC): it returns an error wrapping ErrFutureHLC, and
// counts it as the kit counts its own, when at is beyond the group's clock
// (Clock) plus its maximum skew (MaxClockSkew). The handler dead-letters the
// input with deadletter.ReasonFutureHLC and leaves the state alone, so one bad clock
// cannot hold a key for as long as it is ahead.
func (c *Context[S, PS]) CheckFuture(at time.Time) error {
	now := c.grp.rt.now()
	if !at.After(now.Add(c.grp.rt.maxSkew)) {
		return nil
	}
	c.grp.m.hlcStale.WithLabelValues(c.grp.name, c.Topic(), "future").Inc()
	return fmt.Errorf("%w: time %s, now %s, max skew %s", ErrFutureHLC, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), c.grp.rt.maxSkew)
}
