package fences

import (
	"context"
	"log/slog"
	"sync"

	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/prometheus/client_golang/prometheus"
)

// Shared is one fence catalogue for every module of a binary: the first
// Follow starts a Follower of the topic, every later one shares its
// catalogue and readiness, so the all-in-one keeps one copy of the fences.
// The zero value is not usable; make one with NewShared.
type Shared struct {
	topic string
	mu    sync.Mutex
	f     *Follower
	cat   *Catalogue
}

// NewShared returns a Shared that follows topic once someone asks.
func NewShared(topic string) *Shared { return &Shared{topic: topic} }

// Follow returns the shared catalogue and a channel closed once it has caught
// up with the topic. The first caller also gets run, which follows the topic
// until ctx ends and which it must run (beside its own work); every later
// caller gets run nil. The follower's metrics go to reg (nil: the default
// registry).
func (s *Shared) Follow(cl cluster.Config, log *slog.Logger, reg prometheus.Registerer) (cat *Catalogue, ready <-chan struct{}, run func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		return s.cat, s.f.Ready(), nil
	}
	s.cat = New()
	s.f = NewFollower(cl, s.topic, s.cat, log, reg)
	return s.cat, s.f.Ready(), s.f.Run
}

// OrNew is s, or when s is nil a Shared of its own following topic: what a
// module runs with when the binary shares no catalogue.
func (s *Shared) OrNew(topic string) *Shared {
	if s == nil {
		return NewShared(topic)
	}
	return s
}

// Loaded returns a Shared over a catalogue the caller fills itself (tests,
// benchmarks): it is ready at once and follows nothing.
func Loaded(cat *Catalogue) *Shared {
	s := &Shared{cat: cat, f: &Follower{ready: make(chan struct{})}}
	s.f.markReady()
	return s
}
