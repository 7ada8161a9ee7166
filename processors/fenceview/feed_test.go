package fenceview_test

import (
	"fmt"
	"testing"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fenceview"
)

func TestFeedFiltersAndDropsForSlowSubscribers(t *testing.T) {
	feed := fenceview.NewFeed(2)
	slow := feed.Subscribe(fenceview.Filter{})
	zoo := feed.Subscribe(fenceview.Filter{FenceID: "station-zoo"})
	both := feed.Subscribe(fenceview.Filter{FenceID: "station-zoo", DeviceID: "d2"})
	for i, tr := range []struct{ dev, fence string }{{"d1", "station-zoo"}, {"d2", "park"}, {"d2", "station-zoo"}, {"d3", "park"}} {
		feed.Publish(trigger(string(rune('a'+i)), tr.dev, tr.fence)) // never blocks, whoever reads
	}
	feed.Publish(nil)
	if slow.Dropped() != 2 || zoo.Dropped() != 0 || both.Dropped() != 0 || feed.Dropped() != 2 {
		t.Fatalf("dropped: slow %d zoo %d both %d feed %d", slow.Dropped(), zoo.Dropped(), both.Dropped(), feed.Dropped())
	}
	if a, b := (<-slow.C).GetTriggerId(), (<-slow.C).GetTriggerId(); a != "a" || b != "b" {
		t.Fatalf("slow subscriber kept %s %s, want the oldest two", a, b)
	}
	if a, b := (<-zoo.C).GetTriggerId(), (<-zoo.C).GetTriggerId(); a != "a" || b != "c" {
		t.Fatalf("fence filter: %s %s", a, b)
	}
	if c := (<-both.C).GetTriggerId(); c != "c" || len(both.C) != 0 {
		t.Fatalf("fence+device filter: %s, %d more", c, len(both.C))
	}
	slow.Close()
	slow.Close() // idempotent
	if _, ok := <-slow.C; ok {
		t.Fatal("C still open after Close")
	}
	feed.Publish(trigger("e", "d1", "station-zoo")) // no send on a closed channel
	if feed.Subscribers() != 2 {
		t.Fatalf("%d subscribers after one Close", feed.Subscribers())
	}
}

func TestFeedHistory(t *testing.T) {
	feed := fenceview.NewFeed(0)
	at := func(id, dev, fence string, ms int64) *geofencepb.Trigger {
		tr := trigger(id, dev, fence)
		tr.EventTimeMs = ms
		return tr
	}
	// More than the history holds, remembered out of event-time order (as
	// partitions are read back one after another), one id twice.
	for i := range fenceview.DefaultHistory + 10 {
		ms := int64(1000 + (i*7919)%(fenceview.DefaultHistory+10)) // a permutation
		feed.Remember(at(fmt.Sprintf("t%d", ms), "d1", "f1", ms))
	}
	feed.Publish(at("live", "d2", "f2", 5000))
	feed.Publish(at("live", "d2", "f2", 5000)) // re-emitted: the same trigger
	got := feed.Recent(fenceview.Filter{}, 3)
	if len(got) != 3 || got[0].GetTriggerId() != "live" || got[1].GetEventTimeMs() != 1000+fenceview.DefaultHistory+9 || got[2].GetEventTimeMs() != 1000+fenceview.DefaultHistory+8 {
		t.Fatalf("recent 3: %v", got)
	}
	all := feed.Recent(fenceview.Filter{}, 10*fenceview.DefaultHistory)
	if len(all) != fenceview.DefaultHistory-1 { // the two "live" copies take two places, shown once
		t.Fatalf("history holds %d distinct triggers, want %d", len(all), fenceview.DefaultHistory-1)
	}
	if oldest := all[len(all)-1].GetEventTimeMs(); oldest != 1000+12 {
		t.Fatalf("oldest kept has event time %d: the history must keep the newest", oldest)
	}
	if f := feed.Recent(fenceview.Filter{FenceID: "f2"}, 10); len(f) != 1 || f[0].GetTriggerId() != "live" {
		t.Fatalf("fence filter: %v", f)
	}
	// Remember does not reach subscribers; Publish does.
	sub := feed.Subscribe(fenceview.Filter{})
	defer sub.Close()
	feed.Remember(at("old", "d1", "f1", 1))
	feed.Publish(at("new", "d1", "f1", 9000))
	if got := (<-sub.C).GetTriggerId(); got != "new" || len(sub.C) != 0 {
		t.Fatalf("subscriber got %s (+%d)", got, len(sub.C))
	}
}
