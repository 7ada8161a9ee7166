package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

func TestStateTTLExpiresUntouchedKeysInStreamTime(t *testing.T) {
	tt := tester.New(t)
	g := group.New[state](timerTopology(1), testGroup, quiet)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &state{}
		}
		st.Pings++
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	group.Output[testpb.Trigger](g, topicOut)
	group.StateTTL(g, time.Hour)
	wall := time.UnixMilli(base).Add(24 * time.Hour)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	ping := func(key string, at time.Duration) {
		tt.Consume(topicIn, key, &testpb.Ping{DeviceId: key, DeviceTimeMs: base + at.Milliseconds()})
	}
	fire := func() { fireTimers(t, tt, proc) }
	ping("old", 0)
	ping("old", 10*time.Minute) // expires at 01:10
	ping("busy", 0)
	ping("busy", 65*time.Minute) // stream time 01:05
	fire()
	if tt.TableValue(topicTab, "old") == nil {
		t.Fatal("expired before its TTL")
	}
	ping("busy", 71*time.Minute) // stream time 01:11: old is past 01:10
	fire()
	if v := tt.TableValue(topicTab, "old"); v != nil {
		t.Fatalf("untouched key not removed: %v", v)
	}
	if st, _ := group.StateOf[state](tt.TableValue(topicTab, "busy")); st.GetPings() != 3 {
		t.Fatalf("touched key: %v", st)
	}
	// An expired key starts afresh.
	ping("old", 72*time.Minute)
	if st, _ := group.StateOf[state](tt.TableValue(topicTab, "old")); st.GetPings() != 1 {
		t.Fatalf("key after expiry: %v", st)
	}
}

func TestDedupWithinHorizonAndBound(t *testing.T) {
	d := group.Dedup{Horizon: time.Hour, Max: 3}
	set := &kitpb.SeenSet{}
	at := func(m int) time.Time { return time.UnixMilli(base).Add(time.Duration(m) * time.Minute) }
	if d.Seen(set, "a", at(0)) || d.Seen(set, "b", at(10)) {
		t.Fatal("new ids reported seen")
	}
	if !d.Seen(set, "a", at(20)) {
		t.Fatal("duplicate within the horizon not seen")
	}
	d.Seen(set, "c", at(61)) // a (at 0) is past the horizon
	if d.Seen(set, "a", at(62)) {
		t.Fatal("an id beyond the horizon is still remembered")
	}
	d.Seen(set, "e", at(63))
	d.Seen(set, "f", at(64))
	if n := len(set.GetSeen()); n != 3 {
		t.Fatalf("set holds %d ids, bound 3", n)
	}
}
