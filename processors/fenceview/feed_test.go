package fenceview_test

import (
	"testing"

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
