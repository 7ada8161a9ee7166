package group

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/cluster"
)

// DefaultCommitPoll is how often a processor asks the broker for its group's
// committed offsets, which bound what envelopes remember (once.Bounds.Trim). Sarama
// commits every second; a poll as often keeps at most about two seconds of a
// key's inputs in its envelope.
const DefaultCommitPoll = time.Second

// commitWaitPoll is how often the committed offsets are read while a callback
// waits for them (record.awaitRoom): a wait ends soon after the commit that ends it.
const commitWaitPoll = 100 * time.Millisecond

type topicPartition struct {
	topic     string
	partition int32
}

// commitWatch holds the committed offsets the broker last reported. Reads
// (one per table write) take no lock.
type commitWatch struct {
	offsets atomic.Pointer[map[topicPartition]int64]
	// off: no client could be made, so nothing is known (the replay window
	// alone bounds); waiting: callbacks waiting for a commit (record.awaitRoom),
	// which poll faster; kick starts a poll at once.
	off     atomic.Bool
	waiting atomic.Int32
	kick    chan struct{}
}

func newCommitWatch() *commitWatch { return &commitWatch{kick: make(chan struct{}, 1)} }

// committed is the partition's committed offset. Until the broker first
// answers, and for a partition it reports no commit of, it is 0: every input
// may be redelivered, which only makes Trim keep more and awaitRoom wait.
func (w *commitWatch) committed(topic string, partition int32) (int64, bool) {
	if w.off.Load() {
		return 0, false
	}
	m := w.offsets.Load()
	if m == nil {
		return 0, true
	}
	return (*m)[topicPartition{topic, partition}], true
}

// hurry makes the watch poll every commitWaitPoll until release is called.
func (w *commitWatch) hurry() (release func()) {
	w.waiting.Add(1)
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return func() { w.waiting.Add(-1) }
}

// run polls the group's committed offsets every `every` until ctx ends. A
// failed poll keeps the last answer: committed offsets only move forward
// (a reset of them is the one case the envelope cannot cover, and counts).
func (w *commitWatch) run(ctx context.Context, cl cluster.Config, group string, every time.Duration, log *slog.Logger) {
	opts, err := cl.Kgo()
	var kc *kgo.Client
	if err == nil {
		kc, err = kgo.NewClient(opts...)
	}
	if err != nil {
		w.off.Store(true)
		log.Warn("cannot poll committed offsets; envelopes are bounded by the replay window alone", "err", err)
		return
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		w.poll(ctx, adm, group, every)
		next := every
		if w.waiting.Load() > 0 {
			next = commitWaitPoll
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-t.C:
		}
	}
}

func (w *commitWatch) poll(ctx context.Context, adm *kadm.Client, group string, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max(timeout, time.Second))
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return
	}
	m := map[topicPartition]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			m[topicPartition{o.Topic, o.Partition}] = o.At
		}
	})
	w.offsets.Store(&m)
}
