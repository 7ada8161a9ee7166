package view

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/cluster"
)

// DefaultFreshnessCheck is how often a view asks the broker for its
// table's end offsets (one request) to learn how current its copy is.
const DefaultFreshnessCheck = time.Second

// FreshnessCheck sets how often the view confirms with the broker that
// its copy is current (default DefaultFreshnessCheck); UpToDate is
// known to within about one interval.
func FreshnessCheck(d time.Duration) Opt {
	return func(c *config) {
		if d > 0 {
			c.freshEvery = d
		}
	}
}

// freshness is the time up to which a view is known to hold every record
// of its table: a probe lists the table's end offsets; once the view has
// applied up to them, its data is as current as the probe's time. A
// follower that cannot reach the brokers (its client retrying quietly)
// stops confirming, so the age grows while the copy is served unchanged.
type freshness struct {
	at      atomic.Int64 // unix nanoseconds; 0: never confirmed
	mu      sync.Mutex
	pending *freshProbe // the oldest probe the view has not reached yet
}

type freshProbe struct {
	at   time.Time
	ends map[int32]int64
}

// upToDate is the last confirmed time (zero: never).
func (f *freshness) upToDate() time.Time {
	if ns := f.at.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func (f *freshness) confirm(at time.Time) {
	for {
		old := f.at.Load()
		if at.UnixNano() <= old || f.at.CompareAndSwap(old, at.UnixNano()) {
			return
		}
	}
}

// reached reports whether every partition in stats has applied up to ends.
// A partition that has applied nothing since its recovery counts as far as
// the end its recovery reached.
func reached(st *goka.ViewStats, ends map[int32]int64) bool {
	if st == nil || len(st.Partitions) == 0 {
		return false
	}
	for p, ts := range st.Partitions {
		end, ok := ends[p]
		if !ok || ts == nil {
			return false
		}
		if ts.Status != goka.PartitionRunning {
			return false
		}
		applied := int64(-1)
		if ts.Input != nil {
			applied = ts.Input.LastOffset
		}
		if ts.Recovery != nil {
			applied = max(applied, ts.Recovery.Hwm-1)
		}
		if applied < end-1 {
			return false
		}
	}
	return true
}

// run probes every `every` until ctx ends.
func (f *freshness) run(ctx context.Context, cl cluster.Config, table string, every time.Duration, stats func(context.Context) *goka.ViewStats) {
	kopts, err := cl.Kgo()
	if err != nil {
		return
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(every, time.Second))
		at := time.Now()
		eo, err := adm.ListEndOffsets(pctx, table)
		var ends map[int32]int64
		if err == nil {
			ends = map[int32]int64{}
			eo.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					ends[o.Partition] = o.Offset
				}
			})
		}
		st := stats(pctx)
		cancel()
		f.mu.Lock()
		if f.pending != nil && reached(st, f.pending.ends) {
			f.confirm(f.pending.at)
			f.pending = nil
		}
		if ends != nil {
			if reached(st, ends) {
				f.confirm(at)
				f.pending = nil
			} else if f.pending == nil {
				f.pending = &freshProbe{at: at, ends: ends}
			}
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// UpToDate is the time up to which the view is known to hold every record
// of its table (confirmed with the broker every FreshnessCheck), and
// whether it is known: a view that cannot reach the brokers keeps serving
// its copy while this stays put, so now - UpToDate is the age of what it
// serves. A view under Goka's tester is always current.
func (v *View[M, PM]) UpToDate() (time.Time, bool) {
	if v.fresh == nil {
		return time.Now(), true
	}
	t := v.fresh.upToDate()
	return t, !t.IsZero()
}

// runFreshness runs the view's probe until ctx ends (none under the tester).
func (v *View[M, PM]) runFreshness(ctx context.Context) (wait func()) {
	if v.fresh == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.fresh.run(ctx, v.cl, v.table, v.freshEvery, v.Stats) // guarded: nil once closed
	}()
	return func() { <-done }
}
