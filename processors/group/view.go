package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// View is a typed, read-only, local copy of a group table, hashed with the pinned
// partitioner so Get finds keys written by any Java-compatible producer.
type View[M any, PM codecs.Message[M]] struct {
	v     *goka.View
	table string
	// Goka's View.Run clears its partitions without a lock when it returns,
	// racing with concurrent reads; reads hold mu and stop before Run ends.
	mu     sync.RWMutex
	closed bool
	// recovered is sticky: Goka's Recovered flips back to false for a moment
	// when a partition moves from its initial recovery to catching up forever
	// (Running → Connecting → Running), though its data stays readable.
	recovered atomic.Bool
}

// ViewOpt configures NewView.
type ViewOpt func(*viewConfig)

type viewConfig struct {
	tester   *tester.Tester
	stateDir string
}

// ViewTester reads from Goka's tester instead of a broker (default: a broker).
func ViewTester(tt *tester.Tester) ViewOpt { return func(c *viewConfig) { c.tester = tt } }

// ViewStateDir keeps the view's copy in LevelDB under dir (default: in memory,
// rebuilt from the table topic at every start).
func ViewStateDir(dir string) ViewOpt { return func(c *viewConfig) { c.stateDir = dir } }

// NewView builds a view of table whose values are *M.
func NewView[M any, PM codecs.Message[M]](cl cluster.Config, table string, opts ...ViewOpt) (*View[M, PM], error) {
	cfg := viewConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	vopts := []goka.ViewOption{goka.WithViewLogger(gokaLogger{l: discardLogger()})}
	brokers := cl.Brokers
	if cfg.tester != nil {
		vopts = append(vopts, goka.WithViewTester(cfg.tester))
		brokers = nil
	} else {
		sc, err := cl.Sarama()
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", table, err)
		}
		vopts = append(vopts,
			goka.WithViewConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
			goka.WithViewTopicManagerBuilder(TopicManagerBuilder(sc)),
			goka.WithViewAutoReconnect(),
		)
		if cfg.stateDir != "" {
			vopts = append(vopts, goka.WithViewStorageBuilder(storage.DefaultBuilder(cfg.stateDir)))
		} else {
			vopts = append(vopts, goka.WithViewStorageBuilder(storage.MemoryBuilder()))
		}
	}
	vopts = append(vopts, topology.GokaViewHasher()) // last: nothing overrides it
	v, err := goka.NewView(brokers, goka.Table(table), envelopeCodec[M, PM]{}, vopts...)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", table, err)
	}
	return &View[M, PM]{v: v, table: table}, nil
}

// Run keeps the view up to date until ctx is canceled (then it returns nil).
// When ctx ends, reads stop (ErrViewStopped) before the Goka view closes.
func (v *View[M, PM]) Run(ctx context.Context) error {
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.v.Run(inner) }()
	var err error
	finished := false
	select {
	case <-ctx.Done():
	case err = <-done:
		finished = true
	}
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	cancel()
	if !finished {
		err = <-done
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("view %s: %w", v.table, err)
	}
	return nil
}

// ErrNotRecovered is returned by reads before the view has caught up.
var ErrNotRecovered = errors.New("view has not recovered yet")

// ErrViewStopped is returned by reads once Run has ended.
var ErrViewStopped = errors.New("view has stopped")

// read runs fn unless the view has stopped.
func (v *View[M, PM]) read(fn func() error) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.closed {
		return fmt.Errorf("view %s: %w", v.table, ErrViewStopped)
	}
	return fn()
}

// Get returns the value of key, or nil when absent.
func (v *View[M, PM]) Get(key string) (msg PM, err error) {
	if rerr := v.read(func() error { msg, err = v.get(key); return nil }); rerr != nil {
		return nil, rerr
	}
	return msg, err
}

func (v *View[M, PM]) get(key string) (PM, error) {
	if !v.recoveredOnce() {
		return nil, ErrNotRecovered
	}
	raw, err := v.v.Get(key)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", v.table, err)
	}
	msg, err := StateOf[M, PM](raw)
	if err != nil {
		return nil, fmt.Errorf("view %s key %q: %w", v.table, key, err)
	}
	return msg, nil
}

// Each visits every entry until fn returns false. Undecodable entries are skipped.
func (v *View[M, PM]) Each(fn func(key string, value PM) bool) error {
	return v.read(func() error { return v.each(fn) })
}

func (v *View[M, PM]) each(fn func(key string, value PM) bool) error {
	if !v.recoveredOnce() {
		return ErrNotRecovered
	}
	it, err := v.v.Iterator()
	if err != nil {
		return fmt.Errorf("view %s: %w", v.table, err)
	}
	defer it.Release()
	for it.Next() {
		raw, err := it.Value()
		if err != nil {
			return fmt.Errorf("view %s: %w", v.table, err)
		}
		msg, err := StateOf[M, PM](raw)
		if err != nil || msg == nil {
			continue
		}
		if !fn(it.Key(), msg) {
			return nil
		}
	}
	return nil
}

// Recovered reports whether the view has caught up with its table once.
func (v *View[M, PM]) Recovered() bool {
	ok := false
	_ = v.read(func() error { ok = v.recoveredOnce(); return nil })
	return ok
}

func (v *View[M, PM]) recoveredOnce() bool {
	if v.recovered.Load() {
		return true
	}
	if v.v.Recovered() {
		v.recovered.Store(true)
		return true
	}
	return false
}

// WaitRecovered blocks until the view has recovered or ctx ends. It polls:
// holding a Goka state observer while reading Recovered can deadlock, because
// Goka notifies observers while holding the locks Recovered takes.
func (v *View[M, PM]) WaitRecovered(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !v.Recovered() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("view %s: %w", v.table, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Stats exposes Goka's view statistics (recovery progress, lag per partition);
// nil once the view has stopped.
func (v *View[M, PM]) Stats(ctx context.Context) (st *goka.ViewStats) {
	_ = v.read(func() error { st = v.v.Stats(ctx); return nil })
	return st
}

// Topic is the table topic.
func (v *View[M, PM]) Topic() string { return v.table }
