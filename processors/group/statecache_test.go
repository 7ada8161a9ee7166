package group_test

import (
	"context"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// TestCacheStates: with CacheStates, State hands back the object the key's
// last SetState wrote while the stored bytes are still those it wrote; a
// state changed without SetState, or a value someone else wrote, is decoded
// from the store instead.
func TestCacheStates(t *testing.T) {
	tt := tester.New(t)
	type sight struct {
		st    *testpb.DeviceState
		pings uint64 // as State returned it
	}
	var seen []sight
	g := validGroup(testTopology(2), func(c *ctxT, p *testpb.Ping) error {
		st := c.State()
		seen = append(seen, sight{st, uint64(st.GetPings())})
		if st == nil {
			st = &testpb.DeviceState{DeviceId: c.Key()}
		}
		switch p.GetHlc() {
		case 2: // changed, never handed back
			st.Pings = 999
			return nil
		}
		st.Pings++
		c.SetState(st)
		return nil
	})
	group.CacheStates(g, 1<<20)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	ping := func(hlc uint64) sight {
		t.Helper()
		tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: hlc})
		return seen[len(seen)-1]
	}
	ping(1)
	if got := ping(2); got.st == nil || got.pings != 1 {
		t.Fatalf("ping 2 saw %v, want the written state (pings 1)", got)
	}
	got := ping(3)
	if got.pings != 1 {
		t.Fatalf("ping 3 saw pings %d: a state changed without SetState leaked into the next callback", got.pings)
	}
	if got.st == seen[1].st {
		t.Fatal("ping 3 got the object ping 2 changed and did not hand back")
	}
	afterSet := got.st // ping 3 handed it back with SetState (pings 2)
	if got := ping(4); got.st != afterSet || got.pings != 2 {
		t.Fatalf("ping 4 saw %p (pings %d), want the cached %p (pings 2)", got.st, got.pings, afterSet)
	}
	// Another writer: the stored bytes differ from what was cached.
	tt.SetTableValue(goka.GroupTable(goka.Group(testGroup)), "d1", &testpb.DeviceState{DeviceId: "d1", Pings: 50})
	if got := ping(5); got.pings != 50 {
		t.Fatalf("ping 5 saw pings %d, want 50 (written by someone else)", got.pings)
	}
}
