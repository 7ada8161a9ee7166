package view

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"path/filepath"
	"slices"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/kafka"
	"github.com/fencestream/fencestream/processors/group/internal/statedir"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/dirlock"
)

// View is a typed, read-only, local copy of a group table, hashed with the pinned
// partitioner so Get finds keys written by any Java-compatible producer.
//
// By default it is a Goka view of every partition. With Partitions it is
// the kit's partial view: the same table topic, codec and store, read for the
// listed partitions only (see partialView).
type View[M any, PM codecs.Message[M]] struct {
	b     viewBackend
	table string
	dir   string // the view's state directory, locked while Run runs ("": in memory)
	// Goka's View.Run clears its partitions without a lock when it returns,
	// racing with concurrent reads; reads hold mu and stop before Run ends.
	mu     sync.RWMutex
	closed bool
	// recovered is sticky: Goka's Recovered flips back to false for a moment
	// when a partition moves from its initial recovery to catching up forever
	// (Running → Connecting → Running), though its data stays readable.
	recovered atomic.Bool
	// fresh confirms with the broker how current the copy is (fresh.go;
	// nil under the tester).
	fresh      *freshness
	cl         cluster.Config
	freshEvery time.Duration
}

// viewBackend is what a View reads: Goka's view of every partition or the
// kit's partial view. Values are decoded by the table's envelope codec.
type viewBackend interface {
	Run(ctx context.Context) error
	Get(key string) (any, error)
	Each(fn func(key string, value any) bool) error
	Recovered() bool
	Stats(ctx context.Context) *goka.ViewStats
	// Connected is false while the backend cannot reach the brokers.
	Connected() bool
}

// Opt configures New. Every option overrides one default of
// defaultConfig, which its doc names; config.validate checks them
// together before anything is built.
type Opt func(*config)

type config struct {
	tester     *tester.Tester
	stateDir   string
	storage    statestore.Kind
	partitions []int32
	partial    bool
	lockDir    string // the state directory Run locks (set by storageBuilder)
	freshEvery time.Duration
}

// defaultConfig is the one place the view's defaults are written: Goka's
// view of every partition from a broker, in memory. The store's kind, when
// Storage does not choose it, follows StateDir (storageBuilder).
func defaultConfig() config { return config{freshEvery: DefaultFreshnessCheck} }

// Tester reads from Goka's tester instead of a broker (default: a broker).
func Tester(tt *tester.Tester) Opt { return func(c *config) { c.tester = tt } }

// StateDir keeps the view's copy in the kit's store (Storage, default
// statestore.Default) under dir/<table>, tied to the broker's cluster as a
// group's state directory is, so a restart catches up from the stored offsets
// instead of rebuilding (default: in memory, rebuilt at every start). Views
// of different tables may share dir.
func StateDir(dir string) Opt { return func(c *config) { c.stateDir = dir } }

// Storage chooses the view's local store (default statestore.Default with
// StateDir, statestore.Memory without). Every kind is linear in the table
// size; Goka's own memory storage, sorting its keys on every insert, is not
// used.
func Storage(kind statestore.Kind) Opt { return func(c *config) { c.storage = kind } }

// Partitions makes the view hold only the given partitions of the table
// (default: every partition, through Goka). Such a view is the kit's own:
// it consumes the listed partitions without a consumer group into the same
// store and offsets a full view keeps (so a state directory serves either),
// and Get of a key on another partition answers a *NotHeldError.
func Partitions(ps ...int32) Opt {
	return func(c *config) { c.partitions = slices.Clone(ps); c.partial = true }
}

func (c *config) validate() error {
	if c.partial {
		if c.tester != nil {
			return errors.New("Partitions: it reads a broker, so it cannot be used with Tester")
		}
		if len(c.partitions) == 0 {
			return errors.New("Partitions: no partitions")
		}
		for _, p := range c.partitions {
			if p < 0 {
				return fmt.Errorf("Partitions: partition %d is negative", p)
			}
		}
	}
	if c.storage != "" {
		if _, err := statestore.ParseKind(string(c.storage)); err != nil {
			return fmt.Errorf("Storage: %w", err)
		}
	}
	return nil
}

// storageBuilder is the store of table: the chosen kind under
// stateDir/table, claimed for the broker's cluster, or in memory.
func (c *config) storageBuilder(cl cluster.Config, table string) (storage.Builder, error) {
	kind := c.storage
	if kind == "" {
		kind = statestore.Memory
		if c.stateDir != "" {
			kind = statestore.Default
		}
	}
	if kind == statestore.Memory {
		return statestore.Builder(kind, "")
	}
	if c.stateDir == "" {
		return nil, fmt.Errorf("storage %s needs a state directory (StateDir)", kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := kafka.ClusterID(ctx, cl)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.stateDir, table)
	lock, err := dirlock.Acquire(dir) // held while claimed; Run holds it again
	if err != nil {
		return nil, err
	}
	err = statedir.Claim(dir, id)
	_ = lock.Release()
	if err != nil {
		return nil, err
	}
	c.lockDir = dir
	// Flushed at close, a restart's open replays no log (statestore.FlushOnClose).
	return statestore.Builder(kind, dir, statestore.PebbleMemory(viewMemTable, viewCache), statestore.FlushOnClose())
}

// A view holds a store per partition of its table and only reads it by key,
// so it gets smaller Pebble memtables and cache than a group's (measured at
// 1,000,000 devices over 24 partitions: peak RSS 610 MB with the group's 4 MB
// memtables, see BENCHMARKS.md).
const (
	viewMemTable = 1 << 20
	viewCache    = 16 << 20
)

// New builds a view of table whose values are *M.
func New[M any, PM codecs.Message[M]](cl cluster.Config, table string, opts ...Opt) (*View[M, PM], error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("view %s: %w", table, err)
	}
	if cfg.partial {
		sb, err := cfg.storageBuilder(cl, table)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", table, err)
		}
		pv, err := newPartialView(cl, table, cfg.partitions, sb, tablecodec.Codec[M, PM]{})
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", table, err)
		}
		return &View[M, PM]{b: pv, table: table, dir: cfg.lockDir, fresh: &freshness{}, cl: cl, freshEvery: cfg.freshEvery}, nil
	}
	vopts := []goka.ViewOption{goka.WithViewLogger(kafka.Logger{L: kafka.Discard()})}
	brokers := cl.Brokers
	if cfg.tester != nil {
		vopts = append(vopts, goka.WithViewTester(cfg.tester))
		brokers = nil
	} else {
		sc, err := cl.Sarama()
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", table, err)
		}
		sb, err := cfg.storageBuilder(cl, table)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", table, err)
		}
		vopts = append(vopts,
			goka.WithViewConsumerSaramaBuilder(kafka.SaramaConsumerBuilder(sc)),
			goka.WithViewTopicManagerBuilder(kafka.TopicManagerBuilder(sc)),
			goka.WithViewAutoReconnect(),
			goka.WithViewStorageBuilder(sb),
		)
	}
	vopts = append(vopts, topology.GokaViewHasher()) // last: nothing overrides it
	v, err := goka.NewView(brokers, goka.Table(table), tablecodec.Codec[M, PM]{}, vopts...)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", table, err)
	}
	view := &View[M, PM]{b: gokaView{v}, table: table, dir: cfg.lockDir}
	if cfg.tester == nil {
		view.fresh, view.cl, view.freshEvery = &freshness{}, cl, cfg.freshEvery
	}
	return view, nil
}

// gokaView adapts Goka's view to viewBackend.
type gokaView struct{ v *goka.View }

func (g gokaView) Run(ctx context.Context) error             { return g.v.Run(ctx) }
func (g gokaView) Get(key string) (any, error)               { return g.v.Get(key) }
func (g gokaView) Recovered() bool                           { return g.v.Recovered() }
func (g gokaView) Connected() bool                           { return g.v.CurrentState() != goka.ViewStateConnecting }
func (g gokaView) Stats(ctx context.Context) *goka.ViewStats { return g.v.Stats(ctx) }
func (g gokaView) Each(fn func(key string, value any) bool) error {
	it, err := g.v.Iterator()
	if err != nil {
		return err
	}
	defer it.Release()
	for it.Next() {
		raw, err := it.Value()
		if err != nil {
			return err
		}
		if !fn(it.Key(), raw) {
			return nil
		}
	}
	return nil
}

// Run keeps the view up to date until ctx is canceled (then it returns nil).
// When ctx ends, reads stop (ErrViewStopped) before the Goka view closes.
func (v *View[M, PM]) Run(ctx context.Context) error {
	if v.dir != "" {
		lock, err := dirlock.Acquire(v.dir)
		if err != nil {
			return fmt.Errorf("view %s: state directory: %w", v.table, err)
		}
		defer func() { _ = lock.Release() }()
	}
	inner, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.b.Run(inner) }()
	defer v.runFreshness(inner)() // waited for after the cancel below
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
	raw, err := v.b.Get(key)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", v.table, err)
	}
	msg, err := tablecodec.StateOf[M, PM](raw)
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
	err := v.b.Each(func(key string, raw any) bool {
		msg, err := tablecodec.StateOf[M, PM](raw)
		if err != nil || msg == nil {
			return true
		}
		return fn(key, msg)
	})
	if err != nil {
		return fmt.Errorf("view %s: %w", v.table, err)
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
	if v.b.Recovered() {
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
	_ = v.read(func() error { st = v.b.Stats(ctx); return nil })
	return st
}

// Topic is the table topic.
func (v *View[M, PM]) Topic() string { return v.table }
