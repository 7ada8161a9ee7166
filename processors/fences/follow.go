package fences

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology/cluster"
)

var (
	catalogueVersion = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "fencestream_catalogue_version",
		Help: "Version (fences-topic offset) of the fence catalogue this process holds.",
	})
	catalogueFences = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "fencestream_catalogue_fences",
		Help: "Fences in the catalogue this process holds.",
	})
	fenceRecordsRejected = promauto.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_fence_records_rejected_total",
		Help: "Records of the fences topic that were not valid fences and were skipped.",
	})
)

// Follower keeps a Catalogue in step with the compacted fences topic: every
// instance reads every partition from the start, so each holds the whole
// catalogue, and updates apply without a restart.
type Follower struct {
	cl    cluster.Config
	topic string
	cat   *Catalogue
	log   *slog.Logger
	ready chan struct{}
	once  sync.Once
}

// NewFollower follows topic into cat.
func NewFollower(cl cluster.Config, topic string, cat *Catalogue, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.Default()
	}
	return &Follower{cl: cl, topic: topic, cat: cat, log: log.With("topic", topic), ready: make(chan struct{})}
}

// Ready is closed once the catalogue holds everything the topic held when Run started.
func (f *Follower) Ready() <-chan struct{} { return f.ready }

// Run follows the topic until ctx ends (then it returns nil).
func (f *Follower) Run(ctx context.Context) error {
	kopts, err := f.cl.Kgo()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(f.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return fmt.Errorf("fences follower: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, f.topic)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("fences follower: end offsets of %s: %w", f.topic, err)
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
	if caughtUp() {
		f.markReady()
	}
	codec := codecs.For[geofencepb.Fence]()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err))
		})
		if len(errs) > 0 {
			f.log.Warn("fetching fences failed; retrying", "err", errors.Join(errs...))
		}
		var upserts []Fence
		var deletes []string
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			id := string(r.Key)
			if len(r.Value) == 0 {
				deletes = append(deletes, id)
				upserts = dropID(upserts, id)
				return
			}
			pb, err := codec.Unmarshal(r.Value)
			if err == nil && pb.GetFenceId() != id {
				err = fmt.Errorf("fence_id %q differs from key %q", pb.GetFenceId(), id)
			}
			var fence Fence
			if err == nil {
				fence, err = FenceFromProto(pb)
			}
			if err != nil {
				fenceRecordsRejected.Inc()
				f.log.Error("skipping invalid fence record", "key", id, "offset", r.Offset, "err", err)
				return
			}
			upserts = append(dropID(upserts, id), fence)
			deletes = dropString(deletes, id)
		})
		if len(upserts) > 0 || len(deletes) > 0 {
			var version uint64
			for _, o := range next {
				version += uint64(o)
			}
			if err := f.cat.Apply(version, upserts, deletes); err != nil {
				f.log.Error("fence batch rejected; catalogue unchanged", "err", err)
			} else {
				snap := f.cat.Snapshot()
				catalogueVersion.Set(float64(snap.Version()))
				catalogueFences.Set(float64(snap.Len()))
				f.log.Info("fence catalogue updated", "version", snap.Version(), "fences", snap.Len(), "upserts", len(upserts), "deletes", len(deletes))
			}
		}
		if caughtUp() {
			f.markReady()
		}
	}
}

func (f *Follower) markReady() { f.once.Do(func() { close(f.ready) }) }

func dropID(fs []Fence, id string) []Fence {
	out := fs[:0]
	for _, f := range fs {
		if f.ID != id {
			out = append(out, f)
		}
	}
	return out
}

func dropString(ss []string, s string) []string {
	out := ss[:0]
	for _, v := range ss {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
