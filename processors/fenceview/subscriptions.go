package fenceview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/produce"
)

// MaxSubscriptionBody bounds a subscription write's request body; a larger
// one is answered 413.
const MaxSubscriptionBody = 16 << 10

// SubscriptionWritesFlag is the flag that turns subscription writes on; a
// refused write names it.
const SubscriptionWritesFlag = "--subscription-writes"

// SubscriptionStore is where the subscription write routes write: the
// compacted subscriptions topic (SubscriptionTopic).
type SubscriptionStore interface {
	// Write writes sub under id; a nil sub is a tombstone.
	Write(ctx context.Context, id string, sub *deliverypb.Subscription) error
	// Current returns the latest record of id, nil if none (or removed).
	Current(ctx context.Context, id string) (*deliverypb.Subscription, error)
}

// SubscriptionWrites serves PUT and DELETE /v1/subscriptions/{id} and
// POST /v1/subscriptions/{id}/disable, writing to st (default: nil, writes
// refused with 405 naming SubscriptionWritesFlag).
func SubscriptionWrites(st SubscriptionStore) Opt {
	return func(c *config) { c.subs = st }
}

// SubscriptionBody is the body of PUT /v1/subscriptions/{id}. Types are
// enter, exit or dwell; Enabled defaults to true. The secret is write-only.
type SubscriptionBody struct {
	URL          string   `json:"url"`
	Secret       string   `json:"secret"`
	FenceIDs     []string `json:"fence_ids"`
	FenceTags    []string `json:"fence_tags"`
	DeviceGroups []string `json:"device_groups"`
	Types        []string `json:"types"`
	Enabled      *bool    `json:"enabled"`
}

// SubscriptionJSON is a subscription as the write routes answer it: never
// its secret.
type SubscriptionJSON struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	FenceIDs       []string `json:"fence_ids,omitempty"`
	FenceTags      []string `json:"fence_tags,omitempty"`
	DeviceGroups   []string `json:"device_groups,omitempty"`
	Types          []string `json:"types,omitempty"`
	Enabled        bool     `json:"enabled"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
}

func subscriptionJSON(s *deliverypb.Subscription) *SubscriptionJSON {
	out := &SubscriptionJSON{ID: s.GetId(), URL: s.GetUrl(), FenceIDs: s.GetFenceIds(), FenceTags: s.GetFenceTags(),
		DeviceGroups: s.GetDeviceGroups(), Enabled: s.GetEnabled(), DisabledReason: s.GetDisabledReason()}
	for _, t := range s.GetTypes() {
		out.Types = append(out.Types, strings.ToLower(strings.TrimPrefix(t.String(), "TRIGGER_TYPE_")))
	}
	return out
}

func (s *Server) subscriptionRoutes() {
	// A browser's cross-site request is refused (403): a page elsewhere must
	// not disable a subscription through a browser that can reach fenceview.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin subscription writes are refused")
	}))
	m := s.mux
	m.Handle("PUT /v1/subscriptions/{id}", cop.Handler(s.subsWrite(s.handlePutSubscription)))
	m.Handle("DELETE /v1/subscriptions/{id}", cop.Handler(s.subsWrite(s.handleDeleteSubscription)))
	m.Handle("POST /v1/subscriptions/{id}/disable", cop.Handler(s.subsWrite(s.handleDisableSubscription)))
}

// subsWrite refuses writes while they are off, and ids the producer would.
func (s *Server) subsWrite(h func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.subs == nil {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "subscription writes are off: start fenceview with "+SubscriptionWritesFlag)
			return
		}
		id := r.PathValue("id")
		if !validID(w, "subscription id", id) {
			return
		}
		h(w, r, id)
	}
}

func (s *Server) handlePutSubscription(w http.ResponseWriter, r *http.Request, id string) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxSubscriptionBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var b SubscriptionBody
	err := dec.Decode(&b)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		if mb := (*http.MaxBytesError)(nil); errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over %d bytes", MaxSubscriptionBody))
			return
		}
		writeError(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	sub := &deliverypb.Subscription{Id: id, Url: b.URL, Secret: b.Secret, FenceIds: b.FenceIDs, FenceTags: b.FenceTags,
		DeviceGroups: b.DeviceGroups, Enabled: b.Enabled == nil || *b.Enabled}
	var bad []string
	for _, t := range b.Types {
		v, ok := geofencepb.TriggerType_value["TRIGGER_TYPE_"+strings.ToUpper(t)]
		if !ok || v == int32(geofencepb.TriggerType_TRIGGER_TYPE_UNSPECIFIED) {
			bad = append(bad, fmt.Sprintf("type %q: want enter, exit or dwell", clipped(t)))
			continue
		}
		sub.Types = append(sub.Types, geofencepb.TriggerType(v))
	}
	if !sub.Enabled {
		sub.DisabledReason = "written disabled through fenceview"
	}
	if err := delivery.Validate(sub); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		writeError(w, http.StatusBadRequest, strings.Join(bad, "; "))
		return
	}
	if !s.writeSubscription(w, r, id, sub) {
		return
	}
	writeJSON(w, http.StatusOK, subscriptionJSON(sub))
}

func (s *Server) handleDeleteSubscription(w http.ResponseWriter, r *http.Request, id string) {
	if !s.writeSubscription(w, r, id, nil) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "removed": true})
}

func (s *Server) handleDisableSubscription(w http.ResponseWriter, r *http.Request, id string) {
	cur, err := s.cfg.subs.Current(r.Context(), id)
	if err != nil {
		s.cfg.log.Error("reading subscriptions failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "reading subscriptions: "+err.Error())
		return
	}
	if cur == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no subscription %q", id))
		return
	}
	rec := proto.Clone(cur).(*deliverypb.Subscription)
	rec.Enabled, rec.DisabledReason = false, "disabled through fenceview"
	if !s.writeSubscription(w, r, id, rec) {
		return
	}
	writeJSON(w, http.StatusOK, subscriptionJSON(rec))
}

func (s *Server) writeSubscription(w http.ResponseWriter, r *http.Request, id string, sub *deliverypb.Subscription) bool {
	if err := s.cfg.subs.Write(r.Context(), id, sub); err != nil {
		s.cfg.log.Error("writing subscription failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "writing subscription: "+err.Error())
		return false
	}
	s.cfg.log.Info("subscription written", "tombstone", sub == nil, "enabled", sub.GetEnabled())
	return true
}

// clipped bounds what an error quotes of a request.
func clipped(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

// currentTimeout bounds reading the subscriptions topic for a disable.
const currentTimeout = 10 * time.Second

// SubscriptionTopic is the SubscriptionStore of the compacted subscriptions
// topic: it writes through a topology/produce producer and reads the topic
// whole (it is one small compacted partition) for Current.
type SubscriptionTopic struct {
	cl cluster.Config
	p  *produce.Producer[deliverypb.Subscription, *deliverypb.Subscription]
}

// NewSubscriptionTopic builds the store on the topology's subscriptions
// topic (delivery.TopicSubscriptions). Close it when done.
func NewSubscriptionTopic(cl cluster.Config, topic topology.Topic, opts ...produce.Opt) (*SubscriptionTopic, error) {
	p, err := produce.New[deliverypb.Subscription](cl, topic, opts...)
	if err != nil {
		return nil, fmt.Errorf("subscriptions producer: %w", err)
	}
	return &SubscriptionTopic{cl: cl, p: p}, nil
}

// Close closes the producer.
func (t *SubscriptionTopic) Close() error { return t.p.Close() }

// Write implements SubscriptionStore.
func (t *SubscriptionTopic) Write(ctx context.Context, id string, sub *deliverypb.Subscription) error {
	return t.p.Emit(ctx, id, sub)
}

// Current implements SubscriptionStore: the topic read to its end.
func (t *SubscriptionTopic) Current(ctx context.Context, id string) (*deliverypb.Subscription, error) {
	topic := t.p.Topic().Name
	// A request without a deadline must not hang on a broker that is away.
	ctx, cancel := context.WithTimeout(ctx, currentTimeout)
	defer cancel()
	kopts, err := t.cl.Kgo()
	if err != nil {
		return nil, err
	}
	kc, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	ends, err := kadm.NewClient(kc).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	target := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { target[o.Partition] = o.Offset })
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range target {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	codec := codecs.For[deliverypb.Subscription]()
	var cur *deliverypb.Subscription
	for !done() {
		fetches := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, ctx.Err())
		}
		var errs []error
		fetches.EachError(func(_ string, p int32, err error) { errs = append(errs, fmt.Errorf("partition %d: %w", p, err)) })
		if len(errs) > 0 {
			return nil, fmt.Errorf("reading %s: %w", topic, errors.Join(errs...))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if string(r.Key) != id {
				return
			}
			cur = nil
			if len(r.Value) == 0 {
				return
			}
			if s, err := codec.Unmarshal(r.Value); err == nil && s.GetId() == id && delivery.Validate(s) == nil {
				cur = s
			}
		})
	}
	return cur, nil
}
