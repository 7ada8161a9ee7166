package fenceview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

var (
	// Two clocks, two metrics: how long the pipeline took to deliver a trigger
	// once it was written, and how far behind the devices' own time the
	// triggers are. Replayed or backfilled data has a large event-time lag and
	// a normal processing latency; mixing them made either unreadable.
	triggerLatency = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencestream_trigger_processing_latency_seconds",
		Help:    "Wall-clock time from a trigger's append to fence-triggers (the record timestamp) to its arrival at fenceview's live feed.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms .. ~33s
	})
	triggerEventLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencestream_trigger_event_lag_seconds",
		Help:    "Wall-clock time from a trigger's event time (the device time it is stamped with) to its arrival at fenceview's live feed; large for replayed data.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 24), // 5ms .. ~11.6h
	})
	feedRecordsSkipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_feed_records_skipped_total",
		Help: "Records of the triggers topic the live feed could not use, by reason.",
	}, []string{"reason"})
)

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
}

// NewTriggerConsumer builds a consumer of topology.TopicTriggers into feed
// (log defaults to slog.Default()).
func NewTriggerConsumer(cl cluster.Config, feed *Feed, log *slog.Logger) *TriggerConsumer {
	if log == nil {
		log = slog.Default()
	}
	return &TriggerConsumer{
		cl: cl, feed: feed, topic: topology.TopicTriggers, log: log.With("topic", topology.TopicTriggers),
		now: time.Now, ready: make(chan struct{}),
	}
}

// Ready is closed once the consumer has fixed its start offsets: every
// trigger produced after that reaches the feed.
func (c *TriggerConsumer) Ready() <-chan struct{} { return c.ready }

// RunTriggerConsumer runs NewTriggerConsumer(cl, feed, nil) until ctx ends.
func RunTriggerConsumer(ctx context.Context, cl cluster.Config, feed *Feed) error {
	return NewTriggerConsumer(cl, feed, nil).Run(ctx)
}

// Run consumes until ctx ends (then it returns nil). It starts at the end
// offsets the broker reports when Run starts, records the processing latency
// (now - append time) and the event-time lag (now - event time) of each
// trigger, and skips (and
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
	ends, err := listEnds(ctx, kadm.NewClient(admCl), c.topic)
	admCl.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	start := map[string]map[int32]kgo.Offset{c.topic: {}}
	for p, o := range ends {
		start[c.topic][p] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(append(kopts, kgo.ConsumePartitions(start))...)
	if err != nil {
		return fmt.Errorf("trigger consumer: %w", err)
	}
	defer cl.Close()
	c.once.Do(func() { close(c.ready) })
	c.log.Info("live trigger feed started", "partitions", len(ends))
	codec := codecs.For[geofencepb.Trigger]()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			c.log.Warn("fetching triggers failed; retrying", "partition", p, "err", err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			t, err := codec.Unmarshal(r.Value)
			if err != nil || len(r.Value) == 0 {
				feedRecordsSkipped.WithLabelValues("undecodable").Inc()
				c.log.Debug("skipping undecodable trigger", "partition", r.Partition, "offset", r.Offset, "err", err)
				return
			}
			now := c.now()
			if !r.Timestamp.IsZero() {
				triggerLatency.Observe(max(0, now.Sub(r.Timestamp).Seconds()))
			}
			if ms := t.GetEventTimeMs(); ms > 0 {
				triggerEventLag.Observe(now.Sub(time.UnixMilli(ms)).Seconds())
			}
			c.feed.Publish(t)
		})
	}
}

// listEnds returns the end offset of every partition of topic, retrying
// until the topic's metadata is complete or ctx ends.
func listEnds(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	backoff := 100 * time.Millisecond
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
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
