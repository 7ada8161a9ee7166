package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// MaxIDBytes bounds a subscription id (it is a key and a metric label).
const MaxIDBytes = 128

// ErrInvalidSubscription is wrapped by Validate's errors.
var ErrInvalidSubscription = errors.New("invalid subscription")

// MaxLabelBytes bounds one fence tag or device group a subscription filters
// on: fences.MaxLabelBytes, so a longer one could never match.
const MaxLabelBytes = 128

// Validate checks a subscription record: an id, an http(s) URL with a host,
// a secret, known trigger types, fence tags and device groups of 1 to
// MaxLabelBytes bytes of UTF-8.
func Validate(s *deliverypb.Subscription) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if id := s.GetId(); id == "" || len(id) > MaxIDBytes || !utf8.ValidString(id) {
		bad("id must be 1-%d bytes of UTF-8, got %d bytes", MaxIDBytes, len(id))
	}
	if u, err := url.Parse(s.GetUrl()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("url must be an http:// or https:// URL with a host, got %q", clip(s.GetUrl()))
	}
	if s.GetSecret() == "" {
		bad("secret is required (it signs every request)")
	}
	for _, t := range s.GetTypes() {
		if _, ok := geofencepb.TriggerType_name[int32(t)]; !ok || t == geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED {
			bad("unknown trigger type %v", t)
		}
	}
	for _, l := range []struct {
		what string
		ls   []string
	}{{"fence tag", s.GetFenceTags()}, {"device group", s.GetDeviceGroups()}} {
		for _, v := range l.ls {
			if v == "" || len(v) > MaxLabelBytes || !utf8.ValidString(v) {
				bad("%s must be 1-%d bytes of UTF-8, got %q", l.what, MaxLabelBytes, clip(v))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidSubscription, errors.Join(errs...))
	}
	return nil
}

// Matches reports whether tr passes every non-empty filter of s (enabled or
// not): its fence is one of fence_ids, its type one of types, its fence
// carries one of fence_tags (the trigger's fence_tags) and its device is in
// one of device_groups (the trigger's device_groups).
func Matches(s *deliverypb.Subscription, tr *geofencepb.Trigger) bool {
	if f := s.GetFenceTags(); len(f) > 0 && !shareOne(f, tr.GetFenceTags()) {
		return false
	}
	if f := s.GetDeviceGroups(); len(f) > 0 && !shareOne(f, tr.GetDeviceGroups()) {
		return false
	}
	if f := s.GetFenceIds(); len(f) > 0 && !slices.Contains(f, tr.GetFenceId()) {
		return false
	}
	if t := s.GetTypes(); len(t) > 0 && !slices.Contains(t, tr.GetType()) {
		return false
	}
	return true
}

// shareOne reports whether a and b have an element in common (both are a
// few entries long).
func shareOne(a, b []string) bool {
	for _, v := range a {
		if slices.Contains(b, v) {
			return true
		}
	}
	return false
}

// Subscriptions is the subscriptions topic as every delivery instance holds
// it: every subscription, enabled or not, by id. Safe for concurrent use.
type Subscriptions struct {
	mu   sync.RWMutex
	byID map[string]*deliverypb.Subscription
	list []*deliverypb.Subscription // enabled ones, by id: what triggers are matched against
}

// NewSubscriptions returns an empty set.
func NewSubscriptions() *Subscriptions {
	return &Subscriptions{byID: map[string]*deliverypb.Subscription{}}
}

// Put adds or replaces a subscription (records are never changed in place).
func (s *Subscriptions) Put(sub *deliverypb.Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[sub.GetId()] = sub
	s.rebuild()
}

// Remove deletes a subscription (a tombstone).
func (s *Subscriptions) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
	s.rebuild()
}

func (s *Subscriptions) rebuild() {
	s.list = s.list[:0:0]
	for _, sub := range s.byID {
		if sub.GetEnabled() {
			s.list = append(s.list, sub)
		}
	}
	slices.SortFunc(s.list, func(a, b *deliverypb.Subscription) int { return compareStrings(a.GetId(), b.GetId()) })
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Get returns the subscription id, nil if none.
func (s *Subscriptions) Get(id string) *deliverypb.Subscription {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID[id]
}

// Len is how many subscriptions the set holds, enabled or not.
func (s *Subscriptions) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID)
}

// Matching returns the enabled subscriptions tr matches, by id.
func (s *Subscriptions) Matching(tr *geofencepb.Trigger) []*deliverypb.Subscription {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*deliverypb.Subscription
	for _, sub := range s.list {
		if Matches(sub, tr) {
			out = append(out, sub)
		}
	}
	return out
}

// follow keeps subs in step with the compacted subscriptions topic, read
// whole from the start by every instance (like the fence catalogue); ready
// is closed once it holds what the topic held when it started. Invalid
// records are skipped, logged and counted.
func follow(ctx context.Context, cl cluster.Config, topic string, subs *Subscriptions, log *slog.Logger, m *metrics, ready func()) error {
	kopts, err := cl.Kgo()
	if err != nil {
		return err
	}
	client, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return fmt.Errorf("subscriptions follower: %w", err)
	}
	defer client.Close()
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, topic)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("subscriptions follower: end offsets of %s: %w", topic, err)
	}
	target := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			target[o.Partition] = o.Offset
		}
	})
	next := map[int32]int64{}
	caughtUp := func() bool {
		for p, end := range target {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	codec := codecs.For[deliverypb.Subscription]()
	isReady := false
	for {
		if !isReady && caughtUp() {
			isReady = true
			log.Info("subscriptions loaded", "subscriptions", subs.Len())
			ready()
		}
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			log.Warn("fetching subscriptions failed; retrying", "partition", p, "err", err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if len(r.Value) == 0 {
				subs.Remove(string(r.Key))
				return
			}
			sub, err := codec.Unmarshal(r.Value)
			if err == nil && sub.GetId() != string(r.Key) {
				err = fmt.Errorf("id %q differs from the key", sub.GetId())
			}
			if err == nil {
				err = Validate(sub)
			}
			if err != nil {
				m.rejected.Inc()
				log.Error("skipping invalid subscription record", "offset", r.Offset, "err", err)
				return
			}
			subs.Put(sub)
		})
		m.subscriptions.Set(float64(subs.Len()))
	}
}

// clip bounds what an error (and so a log line) quotes of a record.
func clip(v string) string {
	const n = 200
	if len(v) <= n {
		return v
	}
	return v[:n] + "…"
}
