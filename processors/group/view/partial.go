package view

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/internal/kafka"
	"github.com/fencestream/fencestream/processors/group/retry"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// NotHeldError is returned by a partial view's Get for a key whose partition
// the view does not hold: the caller asks the replica that does.
type NotHeldError struct {
	Table     string
	Key       string
	Partition int32
}

func (e *NotHeldError) Error() string {
	return fmt.Sprintf("view %s does not hold partition %d (key %q)", e.Table, e.Partition, e.Key)
}

// offsetNotStored is Goka's "no offset" answer of a store, so a partial view
// and a Goka view read each other's tables.
const offsetNotStored = -1

// partialView is the kit's view of some partitions of a table. It keeps the
// layout Goka's view keeps (one store per partition from the same builder,
// the raw changelog value under its key, the offset of the last record
// applied), so a state directory written by either is read by the other.
// Invariant: a store's offset never covers a record not yet applied to it.
type partialView struct {
	cl     cluster.Config
	table  string
	parts  []int32 // sorted, unique
	n      int32   // partitions of the table topic
	build  storage.Builder
	decode func([]byte) (any, error)

	stores       map[int32]storage.Storage // set by Run before recovered is
	recovered    atomic.Bool
	disconnected atomic.Bool

	mu    sync.Mutex // guards stats
	stats map[int32]*goka.TableStats
}

func newPartialView(cl cluster.Config, table string, parts []int32, build storage.Builder, codec goka.Codec) (*partialView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := kafka.TopicPartitions(ctx, cl, table)
	if err != nil {
		return nil, err
	}
	parts = slices.Clone(parts)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	for _, p := range parts {
		if p >= n {
			return nil, fmt.Errorf("partition %d: topic %s has %d partitions", p, table, n)
		}
	}
	pv := &partialView{cl: cl, table: table, parts: parts, n: n, build: build, decode: codec.Decode, stats: map[int32]*goka.TableStats{}}
	for _, p := range parts {
		pv.stats[p] = &goka.TableStats{Status: goka.PartitionInitializing, Recovery: &goka.RecoveryStats{}, Input: &goka.InputStats{}, Writes: &goka.OutputStats{}}
	}
	return pv, nil
}

func (v *partialView) holds(p int32) bool {
	_, ok := slices.BinarySearch(v.parts, p)
	return ok
}

func (v *partialView) Get(key string) (any, error) {
	p := topology.PartitionFor(key, v.n)
	if !v.holds(p) {
		return nil, &NotHeldError{Table: v.table, Key: key, Partition: p}
	}
	if !v.recovered.Load() {
		return nil, ErrNotRecovered
	}
	raw, err := v.stores[p].Get(key)
	if err != nil || raw == nil {
		return nil, err
	}
	return v.decode(raw)
}

// Each visits the held partitions in order, each in key order.
func (v *partialView) Each(fn func(key string, value any) bool) error {
	if !v.recovered.Load() {
		return ErrNotRecovered
	}
	for _, p := range v.parts {
		more, err := v.eachIn(v.stores[p], fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (v *partialView) eachIn(st storage.Storage, fn func(string, any) bool) (bool, error) {
	it, err := st.Iterator()
	if err != nil {
		return false, err
	}
	defer it.Release()
	for it.Next() {
		raw, err := it.Value()
		if err != nil {
			return false, err
		}
		val, err := v.decode(raw)
		if err != nil {
			continue
		}
		if !fn(string(it.Key()), val) {
			return false, nil
		}
	}
	return true, it.Err()
}

func (v *partialView) Recovered() bool { return v.recovered.Load() }

// Connected is false after a poll that returned only errors (the client
// retries them; the view's copy stops advancing meanwhile).
func (v *partialView) Connected() bool { return !v.disconnected.Load() }

func (v *partialView) Stats(context.Context) *goka.ViewStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := &goka.ViewStats{Partitions: make(map[int32]*goka.TableStats, len(v.stats))}
	for p, ts := range v.stats {
		c := *ts
		rec, in := *ts.Recovery, *ts.Input
		c.Recovery, c.Input = &rec, &in
		out.Partitions[p] = &c
	}
	return out
}

func (v *partialView) update(p int32, fn func(*goka.TableStats)) {
	v.mu.Lock()
	fn(v.stats[p])
	v.mu.Unlock()
}

// Run opens the stores, consumes the held partitions from their stored
// offsets (no consumer group, nothing committed), and is recovered once each
// has reached the end offset the broker reported at start. It keeps following
// until ctx ends, then closes the stores and returns nil.
func (v *partialView) Run(ctx context.Context) (rerr error) {
	stores, err := v.openStores()
	defer func() {
		for _, st := range stores {
			rerr = errors.Join(rerr, st.Close())
		}
	}()
	if err != nil {
		return err
	}
	v.stores = stores
	kopts, err := v.cl.Kgo()
	if err != nil {
		return err
	}
	starts, ends, err := v.bounds(ctx, kopts)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	from := map[int32]kgo.Offset{}
	target := map[int32]int64{} // partition → last offset to reach (end - 1)
	for _, p := range v.parts {
		stored, err := stores[p].GetOffset(offsetNotStored)
		if err != nil {
			return fmt.Errorf("partition %d: reading local offset: %w", p, err)
		}
		start, end := starts[p], ends[p]
		if stored != offsetNotStored {
			if stored >= end {
				return fmt.Errorf("%w: view %s partition %d: local offset %d but the broker ends at %d (was the broker's data wiped?); delete the view's state directory, it is rebuilt from the table topic", statestore.ErrStateMismatch, v.table, p, stored, end)
			}
			start = max(start, stored+1)
		}
		from[p] = kgo.NewOffset().At(start)
		v.update(p, func(ts *goka.TableStats) {
			ts.Status = goka.PartitionRecovering
			ts.Recovery.StartTime, ts.Recovery.Hwm, ts.Recovery.Offset = time.Now(), end, start-1
		})
		if start < end {
			target[p] = end - 1
		} else {
			v.update(p, func(ts *goka.TableStats) { ts.Status = goka.PartitionRunning; ts.Recovery.RecoveryTime = time.Now() })
		}
	}
	// Small fetches: the records are copied into the store at once, and
	// franz-go's defaults (50 MB a fetch) multiply the peak memory of a
	// cold start.
	kc, err := kgo.NewClient(append(kopts, kgo.FetchMaxBytes(4<<20), kgo.FetchMaxPartitionBytes(1<<20),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{v.table: from}))...)
	if err != nil {
		return err
	}
	defer kc.Close()
	if err := v.markIfRecovered(target); err != nil {
		return err
	}
	wait := retry.Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		fetches := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		failed := len(fetches.Errors()) > 0 && fetches.NumRecords() == 0
		v.disconnected.Store(failed)
		if failed { // the client retries at once: do not spin on a deleted topic
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait.Next()):
			}
			continue
		}
		wait.Reset()
		// Retriable errors are retried by the client; a partition with a
		// fatal one stops advancing and shows in its lag.
		var aerr error
		fetches.EachPartition(func(ft kgo.FetchTopicPartition) {
			if aerr != nil || len(ft.Records) == 0 {
				return
			}
			aerr = v.apply(stores[ft.Partition], ft.Partition, ft.Records, ft.HighWatermark, target)
		})
		if aerr != nil {
			return aerr
		}
		if !v.recovered.Load() {
			if err := v.markIfRecovered(target); err != nil {
				return err
			}
		}
	}
}

// maxParallelOpens bounds the stores opened at once.
const maxParallelOpens = 8

// openStores builds and opens the store of every held partition, several at
// a time: a Pebble open took 35-130 ms on a loaded machine, partly waiting on
// the disk (manifest, syncs), which overlaps, so 24 in a row were most of a
// warm start. Builders are safe for concurrent use (Goka's view opens its
// partitions in parallel too). Every store built is returned, also on error,
// for the caller to close.
func (v *partialView) openStores() (map[int32]storage.Storage, error) {
	built := make([]storage.Storage, len(v.parts))
	errs := make([]error, len(v.parts))
	sem := make(chan struct{}, maxParallelOpens)
	var wg sync.WaitGroup
	for i, p := range v.parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := v.build(v.table, p)
			if err == nil {
				built[i] = st
				err = st.Open()
			}
			if err != nil {
				errs[i] = fmt.Errorf("partition %d: %w", p, err)
			}
		}()
	}
	wg.Wait()
	stores := make(map[int32]storage.Storage, len(v.parts))
	for i, st := range built {
		if st != nil {
			stores[v.parts[i]] = st
		}
	}
	return stores, errors.Join(errs...)
}

// apply writes records of partition p to st as Goka's view does (a nil value
// deletes), then its offset.
func (v *partialView) apply(st storage.Storage, p int32, recs []*kgo.Record, hwm int64, target map[int32]int64) error {
	var bytes int
	for _, r := range recs {
		var err error
		if r.Value == nil {
			err = st.Delete(string(r.Key))
		} else {
			err = st.Set(string(r.Key), r.Value)
		}
		if err != nil {
			return fmt.Errorf("partition %d offset %d: %w", p, r.Offset, err)
		}
		bytes += len(r.Value)
	}
	last := recs[len(recs)-1]
	if err := st.SetOffset(last.Offset); err != nil {
		return fmt.Errorf("partition %d: %w", p, err)
	}
	v.update(p, func(ts *goka.TableStats) {
		ts.Input.Count += uint(len(recs))
		ts.Input.Bytes += bytes
		ts.Input.LastOffset = last.Offset
		ts.Input.OffsetLag = max(1, hwm-last.Offset) // Goka's convention: 1 when caught up
		if ts.Status == goka.PartitionRecovering {
			ts.Recovery.Offset = last.Offset
		}
	})
	if t, ok := target[p]; ok && last.Offset >= t {
		delete(target, p)
		v.update(p, func(ts *goka.TableStats) { ts.Status = goka.PartitionRunning; ts.Recovery.RecoveryTime = time.Now() })
	}
	return nil
}

// markIfRecovered marks the stores recovered (writing their offsets) once no
// partition has a target left.
func (v *partialView) markIfRecovered(target map[int32]int64) error {
	if len(target) > 0 || v.recovered.Load() {
		return nil
	}
	for _, p := range v.parts {
		if err := v.stores[p].MarkRecovered(); err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
	}
	v.recovered.Store(true)
	return nil
}

// bounds lists the start and end offsets of the held partitions, retrying
// until the broker answers for every one or ctx ends.
func (v *partialView) bounds(ctx context.Context, kopts []kgo.Opt) (starts, ends map[int32]int64, err error) {
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, nil, err
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	backoff := 100 * time.Millisecond
	for {
		starts, ends, err = v.listBounds(ctx, adm)
		if err == nil {
			return starts, ends, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("offsets of %s: %w (last error: %v)", v.table, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (v *partialView) listBounds(ctx context.Context, adm *kadm.Client) (map[int32]int64, map[int32]int64, error) {
	so, err := adm.ListStartOffsets(ctx, v.table)
	if err != nil {
		return nil, nil, err
	}
	eo, err := adm.ListEndOffsets(ctx, v.table)
	if err != nil {
		return nil, nil, err
	}
	starts, ends := map[int32]int64{}, map[int32]int64{}
	for _, p := range v.parts {
		s, ok1 := so.Lookup(v.table, p)
		e, ok2 := eo.Lookup(v.table, p)
		if !ok1 || !ok2 || s.Err != nil || e.Err != nil {
			return nil, nil, fmt.Errorf("partition %d: no offsets yet (%v %v)", p, s.Err, e.Err)
		}
		starts[p], ends[p] = s.Offset, e.Offset
	}
	return starts, ends, nil
}
