package fenceview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/processors/group/retry"
	"github.com/fencestream/fencestream/topology/cluster"
)

// consumerMetrics are the live feed's. Two clocks, two metrics: how long the
// pipeline took to deliver a trigger once it was written, and how far behind
// the devices' own time the triggers are. Replayed or backfilled data has a
// large event-time lag and a normal processing latency; mixing them made
// either unreadable.
type consumerMetrics struct {
	latency, eventLag prometheus.Histogram
	skipped           *prometheus.CounterVec
	dropped           prometheus.CounterFunc
	fetchErrors       prometheus.Counter
}

func newConsumerMetrics(reg prometheus.Registerer, feed *Feed) (m consumerMetrics, err error) {
	var e1, e2, e3, e4 error
	m.latency, e1 = collector.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencestream_trigger_processing_latency_seconds",
		Help:    "Wall-clock time from a trigger's append to fence-triggers (the record timestamp) to its arrival at fenceview's live feed.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms .. ~33s
	}))
	m.eventLag, e2 = collector.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencestream_trigger_event_lag_seconds",
		Help:    "Wall-clock time from a trigger's event time (the device time it is stamped with) to its arrival at fenceview's live feed; large for replayed data.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 24), // 5ms .. ~11.6h
	}))
	m.skipped, e3 = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_feed_records_skipped_total",
		Help: "Records of the triggers topic the live feed could not use, by reason.",
	}, []string{"reason"}))
	m.dropped, e4 = collector.Register(reg, prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fencestream_feed_dropped_total",
		Help: "Triggers the live feed dropped for subscribers too slow to keep up (the feed never blocks on a subscriber).",
	}, func() float64 { return float64(feed.Dropped()) }))
	var e5 error
	m.fetchErrors, e5 = collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_feed_fetch_errors_total",
		Help: "Polls of the triggers topic by the live feed that returned errors (each followed by a backoff when nothing else came).",
	}))
	return m, errors.Join(e1, e2, e3, e4, e5)
}

// TriggerConsumer reads the triggers topic from its end (a live feed: no
// consumer group, no committed offsets, every replica sees every trigger
// produced after it started) and publishes each trigger to a Feed.
type TriggerConsumer struct {
	cl    cluster.Config
	feed  *Feed
	topic string
	log   *slog.Logger
	now   func() time.Time
	ready chan struct{}
	once  sync.Once
	m     consumerMetrics
}

// NewTriggerConsumer builds a consumer of geofence.TopicTriggers into feed
// (log defaults to slog.Default()).
func NewTriggerConsumer(cl cluster.Config, feed *Feed, log *slog.Logger, reg prometheus.Registerer) (*TriggerConsumer, error) {
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m, err := newConsumerMetrics(reg, feed)
	if err != nil {
		return nil, fmt.Errorf("fenceview: metrics: %w", err)
	}
	return &TriggerConsumer{
		cl: cl, feed: feed, topic: geofence.TopicTriggers, log: log.With("topic", geofence.TopicTriggers),
		now: time.Now, ready: make(chan struct{}), m: m,
	}, nil
}

// Ready is closed once the consumer has read back the recent triggers into
// the feed's history and fixed its start offsets: every trigger produced
// after that reaches the feed.
func (c *TriggerConsumer) Ready() <-chan struct{} { return c.ready }

// RunTriggerConsumer runs NewTriggerConsumer(cl, feed, nil, nil) until ctx ends.
func RunTriggerConsumer(ctx context.Context, cl cluster.Config, feed *Feed) error {
	c, err := NewTriggerConsumer(cl, feed, nil, nil)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Run consumes until ctx ends (then it returns nil). It first reads the
// last DefaultHistory triggers of each partition into the feed's history
// (Feed.Remember, within backfillTimeout), then publishes from the end
// offsets the broker reported when Run started, records the processing
// latency (now - append time) and the event-time lag (now - event time) of
// each trigger, and skips (and
// counts) records it cannot decode.
func (c *TriggerConsumer) Run(ctx context.Context) error {
	if c.feed == nil {
		return errors.New("trigger consumer: no feed")
	}
	kopts, err := c.cl.Kgo()
	if err != nil {
		return fmt.Errorf("trigger consumer: %w", err)
	}
	admCl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("trigger consumer: %w", err)
	}
	adm := kadm.NewClient(admCl)
	ends, err := listEnds(ctx, adm, c.topic)
	id := topicID(ctx, adm, c.topic)
	var starts kadm.ListedOffsets
	if err == nil {
		starts, err = adm.ListStartOffsets(ctx, c.topic)
	}
	admCl.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := c.backfill(ctx, kopts, starts, ends); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		c.log.Warn("recent triggers not read back; the page's history starts now", "err", err)
	}
	start := map[int32]kgo.Offset{}
	for p, o := range ends {
		start[p] = kgo.NewOffset().At(o)
	}
	c.once.Do(func() { close(c.ready) })
	c.log.Info("live trigger feed started", "partitions", len(ends))
	for {
		if id, err = c.follow(ctx, kopts, start, id); err != nil || ctx.Err() != nil {
			return err
		}
		// The topic was recreated: everything on the new one is newer than
		// what the feed published, so it follows it from its start.
		start = map[int32]kgo.Offset{}
		for p := range c.partitions(ctx, kopts) {
			start[p] = kgo.NewOffset().AtStart()
		}
		c.log.Warn("triggers topic recreated; the live feed follows the new topic from its start", "id", id, "partitions", len(start))
	}
}

// Feed retry bounds: fetches that fail (a broker away, a deleted topic) are
// retried after a jittered wait doubling from feedRetryFirst to
// feedRetryMax, and logged at most once per feedLogEvery.
const (
	feedRetryFirst = 100 * time.Millisecond
	feedRetryMax   = 5 * time.Second
	feedLogEvery   = 10 * time.Second
)

// follow publishes the triggers of c.topic from start until ctx ends (nil)
// or the topic is found recreated under a new id (the new id, nil). The
// client retries failed fetches at once and forever; follow backs off
// between polls that return only errors, so a deleted topic costs a few
// requests a second, not a loop (on main: 8.9 million log lines in 2
// minutes).
func (c *TriggerConsumer) follow(ctx context.Context, kopts []kgo.Opt, start map[int32]kgo.Offset, id string) (string, error) {
	cl, err := kgo.NewClient(append(kopts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: start}))...)
	if err != nil {
		return "", fmt.Errorf("trigger consumer: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	codec := codecs.For[geofencepb.Trigger]()
	wait := retry.Backoff{First: feedRetryFirst, Max: feedRetryMax}
	logs := retry.LogLimit{Every: feedLogEvery}
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", nil
		}
		failed, unknown := 0, false
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			failed++
			ferr = err
			unknown = unknown || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)
		})
		if failed > 0 {
			c.m.fetchErrors.Inc()
			if ok, held := logs.Allow(c.now()); ok {
				c.log.Warn("fetching triggers failed; retrying with backoff", "partitions", failed, "err", ferr, "similar_since_last", held)
			}
			if unknown {
				if now := topicID(ctx, adm, c.topic); now != "" && id != "" && now != id {
					return now, nil
				}
			}
			if fetches.NumRecords() == 0 {
				select {
				case <-ctx.Done():
					return "", nil
				case <-time.After(wait.Next()):
				}
				continue
			}
		} else {
			wait.Reset()
		}
		fetches.EachRecord(func(r *kgo.Record) {
			t, err := codec.Unmarshal(r.Value)
			if err != nil || len(r.Value) == 0 {
				c.m.skipped.WithLabelValues("undecodable").Inc()
				c.log.Debug("skipping undecodable trigger", "partition", r.Partition, "offset", r.Offset, "err", err)
				return
			}
			now := c.now()
			if !r.Timestamp.IsZero() {
				c.m.latency.Observe(max(0, now.Sub(r.Timestamp).Seconds()))
			}
			if ms := t.GetEventTimeMs(); ms > 0 {
				c.m.eventLag.Observe(now.Sub(time.UnixMilli(ms)).Seconds())
			}
			c.feed.Publish(t)
		})
	}
}

// topicID is topic's id on the broker ("" when unknown: no answer, no topic,
// or a broker without topic ids).
func topicID(ctx context.Context, adm *kadm.Client, topic string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return ""
	}
	d, ok := md.Topics[topic]
	if !ok || d.Err != nil || d.ID == (kadm.TopicID{}) {
		return ""
	}
	return d.ID.String()
}

// partitions lists the partitions of c.topic, waiting (with backoff) until
// the broker reports some or ctx ends.
func (c *TriggerConsumer) partitions(ctx context.Context, kopts []kgo.Opt) map[int32]bool {
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil
	}
	defer kc.Close()
	ends, err := listEnds(ctx, kadm.NewClient(kc), c.topic)
	if err != nil {
		return nil
	}
	out := map[int32]bool{}
	for p := range ends {
		out[p] = true
	}
	return out
}

// backfillTimeout bounds reading back the history at start-up; the live
// feed starts after it whatever it got.
const backfillTimeout = 15 * time.Second

// backfill reads the last DefaultHistory triggers of every partition (up to
// ends) into the feed's history without publishing them: the most recent
// DefaultHistory of the topic are among them.
func (c *TriggerConsumer) backfill(ctx context.Context, kopts []kgo.Opt, starts kadm.ListedOffsets, ends map[int32]int64) error {
	from := map[int32]kgo.Offset{}
	pending := map[int32]int64{}
	for p, end := range ends {
		start := end - DefaultHistory
		if s, ok := starts.Lookup(c.topic, p); ok && s.Err == nil {
			start = max(start, s.Offset)
		}
		if start = max(start, 0); start < end {
			from[p] = kgo.NewOffset().At(start)
			pending[p] = end
		}
	}
	if len(pending) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(kopts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: from}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, backfillTimeout)
	defer cancel()
	codec := codecs.For[geofencepb.Trigger]()
	n := 0
	for len(pending) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading back recent triggers: %w (%d read, %d partitions unfinished)", err, n, len(pending))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := pending[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset+1 >= end {
				delete(pending, r.Partition)
			}
			if t, err := codec.Unmarshal(r.Value); err == nil && len(r.Value) > 0 {
				c.feed.Remember(t)
				n++
			}
		})
	}
	c.log.Info("recent triggers read back", "triggers", n)
	return nil
}

// listEnds returns the end offset of every partition of topic, retrying
// until the topic's metadata is complete or ctx ends.
func listEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	wait := retry.Backoff{First: 100 * time.Millisecond, Max: 2 * time.Second}
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			out := map[int32]int64{}
			var perr error
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err != nil {
					perr = o.Err
					return
				}
				out[o.Partition] = o.Offset
			})
			if perr == nil && len(out) > 0 {
				return out, nil
			}
			err = perr
			if err == nil {
				err = fmt.Errorf("topic %s has no partitions", topic)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("trigger consumer: end offsets of %s: %w (last error: %v)", topic, ctx.Err(), err)
		case <-time.After(wait.Next()):
		}
	}
}
