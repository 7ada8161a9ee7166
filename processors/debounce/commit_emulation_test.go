package debounce_test

import (
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
)

// commitEmulation stands in for the broker's committed offsets under Goka's
// tester (which commits nothing): an input counts as committed once
// commitLag of simulated time has passed since it was consumed — sarama's
// one-second auto-commit plus the kit's one-second poll.
type commitEmulation struct {
	now     *time.Time
	queues  map[string]*tester.QueueTracker
	history map[string][]sample
}

type sample struct {
	at  time.Time
	hwm int64
}

const commitLag = 2 * time.Second

func newCommitEmulation(tt *tester.Tester, now *time.Time, topics ...string) *commitEmulation {
	e := &commitEmulation{now: now, queues: map[string]*tester.QueueTracker{}, history: map[string][]sample{}}
	for _, t := range topics {
		e.queues[t] = tt.NewQueueTracker(t)
	}
	return e
}

// tick samples every topic's high watermark at the current simulated time.
func (e *commitEmulation) tick() {
	for t, q := range e.queues {
		e.history[t] = append(e.history[t], sample{at: *e.now, hwm: q.Hwm()})
	}
}

// committed is the next offset to consume as a restart would see it.
func (e *commitEmulation) committed(topic string, _ int32) (int64, bool) {
	h := e.history[topic]
	limit := e.now.Add(-commitLag)
	next, ok := int64(0), false
	for i := len(h) - 1; i >= 0; i-- {
		if !h[i].at.After(limit) {
			next, ok = h[i].hwm, true
			break
		}
	}
	return next, ok
}

func (e *commitEmulation) opts() []group.Opt { return []group.Opt{group.CommittedOffsets(e.committed)} }
