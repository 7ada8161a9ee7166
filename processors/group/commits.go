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
// committed offsets, which bound what envelopes remember (see trim). Sarama
// commits every second; a poll as often keeps at most about two seconds of a
// key's inputs in its envelope.
const DefaultCommitPoll = time.Second

type topicPartition struct {
	topic     string
	partition int32
}

// commitWatch holds the committed offsets the broker last reported. Reads
// (one per table write) take no lock.
type commitWatch struct {
	offsets atomic.Pointer[map[topicPartition]int64]
}

func (w *commitWatch) committed(topic string, partition int32) (int64, bool) {
	m := w.offsets.Load()
	if m == nil {
		return 0, false
	}
	next, ok := (*m)[topicPartition{topic, partition}]
	return next, ok
}

// run polls the group's committed offsets every `every` until ctx ends. A
// failed poll keeps the last answer: committed offsets only move forward
// (a reset of them is the one case the envelope cannot cover, and counts).
func (w *commitWatch) run(ctx context.Context, cl cluster.Config, group string, every time.Duration, log *slog.Logger) {
	opts, err := cl.Kgo()
	if err != nil {
		log.Warn("cannot poll committed offsets; envelopes are bounded by the replay window alone", "err", err)
		return
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		log.Warn("cannot poll committed offsets; envelopes are bounded by the replay window alone", "err", err)
		return
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.poll(ctx, adm, group, every)
		select {
		case <-ctx.Done():
			return
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
