package group

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// DefaultCommitPoll is how often a processor asks the broker for its group's
// committed offsets, which bound what envelopes remember (see trim). Sarama
// commits every second; a poll as often keeps at most about two seconds of a
// key's inputs in its envelope.
const DefaultCommitPoll = time.Second

// commitWaitPoll is how often the committed offsets are read while a callback
// waits for them (awaitRoom): a wait ends soon after the commit that ends it.
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
	// alone bounds); waiting: callbacks waiting for a commit (awaitRoom),
	// which poll faster; kick starts a poll at once.
	off     atomic.Bool
	waiting atomic.Int32
	kick    chan struct{}
}

func newCommitWatch() *commitWatch { return &commitWatch{kick: make(chan struct{}, 1)} }

// committed is the partition's committed offset. Until the broker first
// answers, and for a partition it reports no commit of, it is 0: every input
// may be redelivered, which only makes trim keep more and awaitRoom wait.
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

// awaitRoom runs before a new input is applied. When the key's cursor of the
// input's partition already holds the outputs of ReplayWindow inputs the
// group has not committed, applying another would make the envelope either
// outgrow the window or forget outputs that may not have reached the broker
// (a redelivery of that input could not re-emit them); inputs that emitted
// nothing have nothing to lose and do not count. So the callback waits
// until the committed offset passes the oldest: Goka marks each earlier input
// once its outputs are acknowledged, and sarama commits the marks meanwhile,
// so only this partition pauses, and only as long as commits are behind.
// When the callback's context ends (a rebalance, a stop) it stops waiting and
// the input is applied with nothing forgotten, as are the few Goka may still
// hand over after that: the envelope holds them beyond the window until the
// next commit. Under Goka's tester, or with the committed offsets unknown,
// nothing waits and the window alone bounds.
func (c *Context[S, PS]) awaitRoom() {
	rt := &c.grp.rt
	if !rt.waits || rt.committed == nil {
		return
	}
	cur := cursorOf(c.envelope(), c.Topic(), c.Partition())
	if cur == nil || len(cur.GetSent()) < rt.window {
		return
	}
	topic, part := c.Topic(), c.Partition()
	next, ok := rt.committed(topic, part)
	oldest, full := fullWindow(cur, next, rt.window)
	ctx := c.g.Context()
	if !ok || !full || ctx.Err() != nil {
		return // an input Goka hands over after the context ended: applied
	}
	c.grp.m.windowWaits.WithLabelValues(c.grp.name, topic).Inc()
	log := c.Logger().With("topic", topic, "offset", c.Offset(), "oldest_uncommitted", oldest, "committed", next, "window", rt.window)
	log.Info("key has a replay window of uncommitted inputs; waiting for the group's offset commit before applying the next")
	if rt.hurry != nil {
		defer rt.hurry()()
	}
	start := time.Now()
	t := time.NewTimer(commitWaitPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopped waiting for the offset commit (the partition is stopping); input applied, the envelope keeps one more than the window", "waited", time.Since(start))
			return
		case <-t.C:
		}
		if next, ok := rt.committed(topic, part); !ok || next > oldest {
			log.Debug("offset commit passed the oldest input; applying", "waited", time.Since(start), "committed", next)
			return
		}
		t.Reset(commitWaitPoll)
	}
}

// fullWindow reports whether the cursor holds the outputs of window or more
// inputs at or above the committed offset next, and the offset of the
// window-th newest of them: the commit must pass it to make room.
func fullWindow(cur *kitpb.Cursor, next int64, window int) (oldest int64, full bool) {
	var live []uint64
	for _, r := range cur.GetSent() {
		if cur.GetOffset()-int64(r.GetBack()) >= next {
			live = append(live, r.GetBack())
		}
	}
	if len(live) < window {
		return 0, false
	}
	slices.Sort(live) // newest first
	return cur.GetOffset() - int64(live[window-1]), true
}
