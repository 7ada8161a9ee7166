package fences

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/group/boundedlog"
	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/processors/group/retry"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// followMetrics are a follower's, registered on the registry it is given.
type followMetrics struct {
	version, fences prometheus.Gauge
	rejected        prometheus.Counter
}

func newFollowMetrics(reg prometheus.Registerer) (followMetrics, error) {
	var m followMetrics
	var e1, e2, e3 error
	m.version, e1 = collector.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencestream_catalogue_version",
		Help: "Version (fences-topic offset) of the fence catalogue this process holds.",
	}))
	m.fences, e2 = collector.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencestream_catalogue_fences",
		Help: "Fences in the catalogue this process holds.",
	}))
	m.rejected, e3 = collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_fence_records_rejected_total",
		Help: "Records of the fences topic that were not valid fences and were skipped.",
	}))
	return m, errors.Join(e1, e2, e3)
}

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
	reg   prometheus.Registerer
	m     followMetrics
}

// NewFollower follows topic into cat; its metrics go to reg (nil: the
// default registry).
func NewFollower(cl cluster.Config, topic string, cat *Catalogue, log *slog.Logger, reg prometheus.Registerer) *Follower {
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	// Bounded: a fence record's key and error may be a megabyte.
	return &Follower{cl: cl, topic: topic, cat: cat, log: boundedlog.New(log).With("topic", topic), ready: make(chan struct{}), reg: reg}
}

// Ready is closed once the catalogue holds everything the topic held when Run started.
func (f *Follower) Ready() <-chan struct{} { return f.ready }

// Run follows the topic until ctx ends (then it returns nil).
func (f *Follower) Run(ctx context.Context) error {
	m, err := newFollowMetrics(f.reg)
	if err != nil {
		return fmt.Errorf("fences: metrics: %w", err)
	}
	f.m = m
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
	// Invalid records met while catching up are held by key and logged once
	// caught up, each once: a later record for the key (a fix or a tombstone)
	// makes the earlier one history, not news.
	pending := map[string]invalidRecord{}
	// ops holds the latest change per fence id not yet applied: nil is a
	// tombstone. The last record of a key decides, as in the topic.
	ops := map[string]*Fence{}
	report := func(r invalidRecord) {
		f.log.Error("skipping invalid fence record", "key", topology.KeyExcerpt(r.key), "offset", r.offset, "err", r.err,
			"fix", "remove it with: "+DeleteCommand([]byte(r.key)))
	}
	flush := func() {
		keys := make([]string, 0, len(pending))
		for k := range pending {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			report(pending[k])
		}
		clear(pending)
	}
	// The client retries failed fetches at once: a poll that returns only
	// errors (a deleted topic) waits before the next, and the warning is
	// rate-limited, so a broken topic costs neither a core nor the disk.
	wait := retry.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}
	logs := retry.LogLimit{Every: 10 * time.Second}
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
			if ok, held := logs.Allow(time.Now()); ok {
				f.log.Warn("fetching fences failed; retrying with backoff", "err", errors.Join(errs...), "similar_since_last", held)
			}
			if fetches.NumRecords() == 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait.Next()):
				}
				continue
			}
		} else {
			wait.Reset()
		}
		recs := fetches.Records()
		for i, d := range decodeRecords(recs, codec) {
			r := recs[i]
			next[r.Partition] = r.Offset + 1
			id := string(r.Key)
			delete(pending, id)
			if d.err != nil {
				f.m.rejected.Inc()
				bad := invalidRecord{key: id, offset: r.Offset, err: d.err}
				if f.isReady() {
					report(bad)
				} else {
					pending[id] = bad
				}
				continue
			}
			ops[id] = d.fence // nil for a tombstone
		}
		// While catching up, changes gather in ops and are indexed once, when
		// the catalogue is complete: a start costs one bulk build, not one
		// rebuild per fetch.
		if len(ops) > 0 && (f.isReady() || caughtUp()) {
			var upserts []Fence
			var deletes []string
			for id, fence := range ops {
				if fence == nil {
					deletes = append(deletes, id)
				} else {
					upserts = append(upserts, *fence)
				}
			}
			clear(ops)
			var version uint64
			for _, o := range next {
				version += uint64(o)
			}
			if err := f.cat.Apply(version, upserts, deletes); err != nil {
				f.log.Error("fence batch rejected; catalogue unchanged", "err", err)
			} else {
				snap := f.cat.Snapshot()
				f.m.version.Set(float64(snap.Version()))
				f.m.fences.Set(float64(snap.Len()))
				f.log.Info("fence catalogue updated", "version", snap.Version(), "fences", snap.Len(), "upserts", len(upserts), "deletes", len(deletes))
			}
		}
		if caughtUp() {
			flush()
			f.markReady()
		}
	}
}

// decoded is one fences-topic record: the fence, nil for a tombstone, or
// why it is not a valid fence.
type decoded struct {
	fence *Fence
	err   error
}

// decodeRecords decodes and validates records on every core (a start's
// main cost), in input order.
func decodeRecords(recs []*kgo.Record, codec codecs.Proto[geofencepb.Fence, *geofencepb.Fence]) []decoded {
	out := make([]decoded, len(recs))
	one := func(i int) {
		r := recs[i]
		if len(r.Value) == 0 {
			return
		}
		pb, err := codec.Unmarshal(r.Value)
		if err == nil && pb.GetFenceId() != string(r.Key) {
			err = fmt.Errorf("fence_id %q differs from key %q", pb.GetFenceId(), r.Key)
		}
		var fence Fence
		if err == nil {
			fence, err = FenceFromProto(pb)
		}
		if err != nil {
			out[i].err = err
			return
		}
		out[i].fence = &fence
	}
	workers := min(runtime.GOMAXPROCS(0), len(recs)/64+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(recs); i += workers {
				one(i)
			}
		})
	}
	wg.Wait()
	return out
}

type invalidRecord struct {
	key    string
	offset int64
	err    error
}

func (f *Follower) markReady() { f.once.Do(func() { close(f.ready) }) }

func (f *Follower) isReady() bool {
	select {
	case <-f.ready:
		return true
	default:
		return false
	}
}

// DeleteCommand is the fencectl command line that removes the record with
// this key from the fences topic (a tombstone for exactly that key): the key,
// quoted for a POSIX shell when it needs it, or its hex form when it is not
// printable UTF-8 or would read as a flag.
func DeleteCommand(key []byte) string {
	printable := utf8.Valid(key) && len(key) > 0 && key[0] != '-'
	plain := true
	for _, r := range string(key) {
		if !unicode.IsPrint(r) {
			printable = false
		}
		if !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '@' || r == '+' || r == ',' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			plain = false
		}
	}
	switch {
	case len(key) == 0: // quoted, or the shell drops the argument
		return "fencectl fences delete --hex ''"
	case !printable:
		return "fencectl fences delete --hex " + hex.EncodeToString(key)
	case plain:
		return "fencectl fences delete " + string(key)
	}
	return "fencectl fences delete '" + strings.ReplaceAll(string(key), "'", `'\''`) + "'"
}
