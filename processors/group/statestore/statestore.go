package statestore

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka/storage"
)

// Kind names a store implementation.
type Kind string

// The stores; see the package doc for what each keeps and how it recovers.
const (
	Pebble      Kind = "pebble"       // Pebble, offset deferred (default)
	LevelDB     Kind = "leveldb"      // goleveldb with tuned options, offset deferred
	Memory      Kind = "memory"       // in memory, rebuilt from the changelog on start
	GokaLevelDB Kind = "goka-leveldb" // Goka's DefaultBuilder: offset written after every message
	// Redis keeps the tables in a shared Redis server (RedisServer), one
	// round trip per read or write: the shared store local state is measured
	// against (fencectl bench redis). Not in Kinds: it needs a server.
	Redis Kind = "redis"
)

// Default is the store used when none is chosen.
const Default = Pebble

// Kinds lists every store, default first.
func Kinds() []Kind { return []Kind{Pebble, LevelDB, Memory, GokaLevelDB} }

// ParseKind reads a kind name as given to --storage.
func ParseKind(s string) (Kind, error) {
	for _, k := range append(Kinds(), Redis) {
		if string(k) == strings.ToLower(strings.TrimSpace(s)) {
			return k, nil
		}
	}
	names := make([]string, 0, len(Kinds())+1)
	for _, k := range append(Kinds(), Redis) {
		names = append(names, string(k))
	}
	return "", fmt.Errorf("unknown storage %q (one of %s)", s, strings.Join(names, ", "))
}

// Opt tunes a store. Every option overrides one default of defaults, which
// its doc names; validate checks them together.
type Opt func(*config)

type config struct {
	offsetInterval time.Duration
	log            *slog.Logger
	onDamaged      func(path, movedTo string, cause error)
	onUnwritable   func(error)
	memTable       int   // Pebble memtable bytes per table (0: pebbleMemTableBytes)
	cache          int64 // Pebble block cache bytes per builder (0: pebbleCacheBytes)
	flushOnClose   bool
	minFree        int64 // free bytes kept beyond the tables' next flushes
	redisAddr      string
	redisNS        string
}

// PebbleMemory sizes Pebble's memory: memTable bytes per table (default 4
// MB; a table holds up to two while one is flushed) and a block cache of
// cache bytes shared by the builder's tables (default 64 MB). A view of 24
// partitions holds 24 tables; smaller memtables keep it small, at the cost of
// more, smaller flushes. 0 keeps a default.
func PebbleMemory(memTable int, cache int64) Opt {
	return func(c *config) { c.memTable, c.cache = memTable, cache }
}

// FlushOnClose makes a Pebble table write its memtable to disk when it
// closes (default: it does not, and the next open replays the table's log
// into a memtable and flushes that). The flush is the same work; done at
// close, a restart opens the table without replaying anything: measured at
// 14 of 19 ms of CPU per reopened table, 24 tables per view. The other kinds
// ignore it.
func FlushOnClose() Opt { return func(c *config) { c.flushOnClose = true } }

// MinFreeSpace is the free space (bytes) a Pebble builder's directory must
// keep beyond what its open tables' next flushes and log writes need
// (default DefaultMinFreeSpace, 4 MB). Below it every table of the builder
// fails as unwritable (OnUnwritable: readiness false, the process stops)
// before Pebble meets a full disk. The other kinds ignore it.
func MinFreeSpace(bytes int64) Opt { return func(c *config) { c.minFree = bytes } }

// OffsetInterval is how often a changed offset is written (default 1 s; Goka
// writes it after every message). Longer means fewer writes and a longer
// replay after a crash; it never affects correctness.
func OffsetInterval(d time.Duration) Opt { return func(c *config) { c.offsetInterval = d } }

// Logger receives the storage engine's messages (default: discarded).
func Logger(l *slog.Logger) Opt { return func(c *config) { c.log = l } }

func (c *config) validate() error {
	var errs []error
	if c.offsetInterval <= 0 {
		errs = append(errs, fmt.Errorf("OffsetInterval: must be positive, got %v", c.offsetInterval))
	}
	if c.memTable < 0 || c.cache < 0 {
		errs = append(errs, fmt.Errorf("PebbleMemory: must not be negative, got memtable %d, cache %d", c.memTable, c.cache))
	}
	if c.minFree < 0 {
		errs = append(errs, fmt.Errorf("MinFreeSpace: must not be negative, got %d", c.minFree))
	}
	return errors.Join(errs...)
}

// defaults is the one place a store's defaults are written.
func defaults() config {
	return config{offsetInterval: time.Second, log: slog.New(slog.DiscardHandler), minFree: DefaultMinFreeSpace}
}

func newConfig(opts []Opt) (config, error) {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	return c, c.validate()
}

// Builder returns Goka's storage builder for kind, keeping tables under dir
// (unused by Memory and Redis). Each kind uses its own file names, so switching kinds
// starts from an empty store and recovers from the changelog.
func Builder(kind Kind, dir string, opts ...Opt) (storage.Builder, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	switch kind {
	case Pebble:
		return pebbleBuilder(dir, cfg), nil
	case LevelDB:
		return levelDBBuilder(dir, cfg), nil
	case Memory:
		return memoryBuilder(), nil
	case GokaLevelDB:
		return storage.DefaultBuilder(dir), nil
	case Redis:
		return redisBuilder(cfg)
	default:
		return nil, fmt.Errorf("unknown storage %q", kind)
	}
}

func tablePath(dir, suffix, topic string, partition int32) string {
	return filepath.Join(dir, fmt.Sprintf("%s.%d%s", topic, partition, suffix))
}

// offsetKey is Goka's key for the offset, so a LevelDB table written by Goka's
// storage reads the same here.
const offsetKey = "__offset"

func encodeOffset(o int64) []byte { return []byte(strconv.FormatInt(o, 10)) }

func decodeOffset(b []byte) (int64, error) {
	o, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decoding stored offset %q: %w", b, err)
	}
	return o, nil
}

// offsets keeps a table's offset in memory and writes it behind the values it
// covers (see the package doc): every interval if it changed, when recovery is
// marked, and on close.
type offsets struct {
	cur     atomic.Int64 // 0: nothing set yet (Goka's convention)
	written int64        // guarded by mu
	mu      sync.Mutex
	put     func([]byte) error
	stop    chan struct{}
	done    chan struct{}
	closing sync.Once
}

func newOffsets(put func([]byte) error, every time.Duration) *offsets {
	o := &offsets{put: put, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-o.stop:
				return
			case <-t.C:
				_ = o.flush() // retried at the next tick, on recovery and on close
			}
		}
	}()
	return o
}

func (o *offsets) set(v int64) { o.cur.Store(v) }

// get is the in-memory offset when one was set since open, else stored().
func (o *offsets) get(def int64, stored func() ([]byte, error)) (int64, error) {
	if v := o.cur.Load(); v != 0 {
		return v, nil
	}
	b, err := stored()
	if err != nil || b == nil {
		return def, err
	}
	return decodeOffset(b)
}

func (o *offsets) flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.cur.Load()
	if v == 0 || v == o.written {
		return nil
	}
	if err := o.put(encodeOffset(v)); err != nil {
		return fmt.Errorf("writing offset: %w", err)
	}
	o.written = v
	return nil
}

// close stops the ticker and writes the last offset (once; later calls are
// no-ops).
func (o *offsets) close() error {
	first := false
	o.closing.Do(func() { first = true; close(o.stop) })
	if !first {
		return nil
	}
	<-o.done
	return o.flush()
}

// MarshalText and UnmarshalText let a Kind be a flag (flag.TextVar).
func (k Kind) MarshalText() ([]byte, error) { return []byte(k), nil }

// UnmarshalText parses a kind name, refusing unknown ones.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// FlagUsage describes a --storage flag.
const FlagUsage = "local store of the group tables: pebble, leveldb (offset deferred), memory (rebuilt from the changelog on start) or goka-leveldb (Goka's own)"
