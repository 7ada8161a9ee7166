package group_test

import (
	"context"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// TestCacheEnvelopes: with CacheEnvelopes and CacheStates, a key's next input
// gets the state object its last SetState wrote straight from the envelope
// cache, its cursor still recognises a copy of the last input and refuses a
// different record with its HLC, a state changed without SetState is not
// handed on, and a value another writer stored wins over the cached one.
func TestCacheEnvelopes(t *testing.T) {
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
		if p.GetLat() == 1 { // changed, never handed back
			st.Pings = 999
			return nil
		}
		st.Pings++
		st.LastHlc = p.GetHlc()
		c.SetState(st)
		return nil
	}, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() }))
	group.CacheEnvelopes(g, 1<<20)
	group.CacheStates(g, 1<<20)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	dlq := tt.NewQueueTracker(topology.TopicDeadLetter)
	send := func(p *testpb.Ping) { tt.Consume(topicIn, "d1", p) }
	last := func() sight { return seen[len(seen)-1] }

	send(&testpb.Ping{DeviceId: "d1", Hlc: 1})
	written := seen[0]
	send(&testpb.Ping{DeviceId: "d1", Hlc: 2})
	if got := last(); got.pings != 1 {
		t.Fatalf("hlc 2 saw pings %d, want 1", got.pings)
	}
	afterSet := last().st // handed back with pings 2
	if written.st != nil {
		t.Fatal("the first input saw a state")
	}

	// A copy of the last input (same HLC, same bytes, new offset) is
	// recognised from the cached cursor; another record with its HLC is not.
	send(&testpb.Ping{DeviceId: "d1", Hlc: 2})
	if len(seen) != 2 {
		t.Fatalf("a copy of the last input reached the handler (%d calls)", len(seen))
	}
	send(&testpb.Ping{DeviceId: "d1", Hlc: 2, Lon: 5})
	if len(seen) != 2 {
		t.Fatal("a different record with the last HLC reached the handler")
	}
	if _, _, ok := dlq.Next(); !ok {
		t.Fatal("the different record with the last HLC was not dead-lettered")
	}

	send(&testpb.Ping{DeviceId: "d1", Hlc: 3})
	if got := last(); got.st != afterSet || got.pings != 2 {
		t.Fatalf("hlc 3 saw %p (pings %d), want the cached %p (pings 2)", got.st, got.pings, afterSet)
	}
	send(&testpb.Ping{DeviceId: "d1", Hlc: 4, Lat: 1}) // changes its state, hands nothing back
	send(&testpb.Ping{DeviceId: "d1", Hlc: 5})
	if got := last(); got.pings != 3 || got.st == seen[len(seen)-2].st {
		t.Fatalf("hlc 5 saw pings %d (%p): a state changed without SetState leaked into the next callback", got.pings, got.st)
	}

	// Another writer: what the store holds wins.
	tt.SetTableValue(goka.GroupTable(goka.Group(testGroup)), "d1", &testpb.DeviceState{DeviceId: "d1", Pings: 50})
	send(&testpb.Ping{DeviceId: "d1", Hlc: 6})
	if got := last(); got.pings != 50 {
		t.Fatalf("hlc 6 saw pings %d, want 50 (written by someone else)", got.pings)
	}
}
