package fenceview

import (
	"sync"
	"sync/atomic"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// DefaultFeedBuffer is how many triggers a subscriber may fall behind before
// the feed drops triggers for it.
const DefaultFeedBuffer = 256

// Filter selects triggers of a subscription. Empty fields match everything.
type Filter struct {
	FenceID  string
	DeviceID string
}

// Match reports whether t passes the filter.
func (f Filter) Match(t *geofencepb.Trigger) bool {
	return (f.FenceID == "" || f.FenceID == t.GetFenceId()) &&
		(f.DeviceID == "" || f.DeviceID == t.GetDeviceId())
}

// Feed is an in-process publish/subscribe hub for triggers. Publish never
// blocks: each subscriber has a bounded buffer, and a trigger that does not
// fit is dropped for that subscriber and counted (Subscription.Dropped,
// Feed.Dropped and fencestream_feed_dropped_total). The zero Feed is not
// usable; build it with NewFeed. All methods are safe for concurrent use.
type Feed struct {
	buffer  int
	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	dropped atomic.Uint64
	hist    history
}

// NewFeed returns a feed whose subscribers buffer up to buffer triggers
// (DefaultFeedBuffer when buffer <= 0).
func NewFeed(buffer int) *Feed {
	if buffer <= 0 {
		buffer = DefaultFeedBuffer
	}
	return &Feed{buffer: buffer, subs: map[*Subscription]struct{}{}, hist: history{limit: DefaultHistory}}
}

// Subscription is one subscriber of a Feed. Read triggers from C; call
// Close when done (C is closed then).
type Subscription struct {
	C       <-chan *geofencepb.Trigger
	c       chan *geofencepb.Trigger
	filter  Filter
	feed    *Feed
	dropped atomic.Uint64
	once    sync.Once
}

// Subscribe registers a subscriber receiving the triggers published from now
// on that match filter.
func (f *Feed) Subscribe(filter Filter) *Subscription {
	c := make(chan *geofencepb.Trigger, f.buffer)
	s := &Subscription{C: c, c: c, filter: filter, feed: f}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s
}

// Dropped is how many matching triggers this subscriber missed because its
// buffer was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes C. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.feed.mu.Lock()
		delete(s.feed.subs, s)
		close(s.c)
		s.feed.mu.Unlock()
	})
}

// Publish hands t to every matching subscriber without blocking and keeps
// it in the feed's history (see Recent). Subscribers must not modify the
// trigger: all of them share it.
func (f *Feed) Publish(t *geofencepb.Trigger) {
	if t == nil {
		return
	}
	f.hist.add(t)
	f.mu.RLock()
	defer f.mu.RUnlock()
	for s := range f.subs {
		if !s.filter.Match(t) {
			continue
		}
		select {
		case s.c <- t:
		default:
			s.dropped.Add(1)
			f.dropped.Add(1)
		}
	}
}

// Subscribers is the number of current subscribers.
func (f *Feed) Subscribers() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.subs)
}

// Dropped is the total number of triggers dropped for slow subscribers.
func (f *Feed) Dropped() uint64 { return f.dropped.Load() }
