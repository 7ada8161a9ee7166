package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/lovoo/goka/storage"
)

// pebbleCacheBytes is the block cache shared by every table of one builder (a
// process runs 24 partitions; a cache each would multiply it).
const pebbleCacheBytes = 64 << 20

// pebbleMemTableBytes is the default memtable size of one table.
const pebbleMemTableBytes = 4 << 20

// pebbleManifestBytes bounds a table's MANIFEST before Pebble rewrites it
// as a snapshot (Pebble's default is 128 MB: a small table flushing often
// would keep a log of every flush).
const pebbleManifestBytes = 1 << 20

// pebbleCloseWait is how long Close waits for Pebble's Close. A Pebble that
// panicked inside a write can hold a mutex its Close waits on forever; the
// table is then abandoned, so a process that is stopping does stop.
const pebbleCloseWait = 5 * time.Second

func pebbleBuilder(dir string, cfg config) storage.Builder {
	return watchedPebbleBuilder(dir, cfg, newDirWatch(dir, cfg))
}

// watchedPebbleBuilder is pebbleBuilder with its directory's watch (tests
// tune it).
func watchedPebbleBuilder(dir string, cfg config, watch *dirWatch) storage.Builder {
	cacheBytes, memTable := int64(pebbleCacheBytes), pebbleMemTableBytes
	if cfg.cache > 0 {
		cacheBytes = cfg.cache
	}
	if cfg.memTable > 0 {
		memTable = cfg.memTable
	}
	cache := pebble.NewCache(cacheBytes) // lives as long as the builder: one per process
	return func(topic string, partition int32) (storage.Storage, error) {
		path := tablePath(dir, ".pebble", topic, partition)
		h := &health{path: path, cfg: cfg, watch: watch, counted: true}
		if err := watch.add(h); err != nil {
			return nil, fmt.Errorf("opening pebble table %s: %w", path, err)
		}
		db, err := openTable(path, cfg, func() (db *pebble.DB, err error) {
			defer recoverFatal(h, &err)
			return pebble.Open(path, pebbleOptions(cache, memTable, h))
		})
		if err != nil {
			watch.remove(h)
			return nil, fmt.Errorf("opening pebble table %s: %w", path, err)
		}
		s := &pebbleStore{db: db, h: h}
		s.off = newOffsets(s.putOffset, cfg.offsetInterval)
		flush := s.flushIdle
		h.flushIdle.Store(&flush)
		return s, nil
	}
}

// pebbleOptions route Pebble's corruption reports and background errors to
// h instead of its defaults (DataCorruption calls Logger.Fatalf, a panic in
// a compaction goroutine nothing can recover), write through guardFS, and
// count what the table's next flush writes for the directory's watch.
func pebbleOptions(cache *pebble.Cache, memTable int, h *health) *pebble.Options {
	return &pebble.Options{
		Cache:               cache,
		MemTableSize:        uint64(memTable),
		MaxManifestFileSize: pebbleManifestBytes,
		FS:                  &guardFS{FS: vfs.Default, h: h},
		Cleaner:             removeCleaner{},
		Logger:              pebbleLogger{l: h.cfg.log, h: h},
		EventListener: &pebble.EventListener{
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				_ = h.markDamaged(fmt.Errorf("%s", info))
			},
			BackgroundError: func(err error) {
				switch {
				case unwritable(err):
					_ = h.markUnwritable(err)
				case pebble.IsCorruptionError(err):
					_ = h.markDamaged(err)
				default:
					h.cfg.log.Error("pebble background error", "table", h.path, "err", err)
				}
			},
			// A new log starts a new memtable: what the old one holds is
			// what a coming flush writes (Pebble flushes the queue of such
			// memtables when it holds a memtable's size, or when asked).
			WALCreated: func(pebble.WALCreateInfo) { h.flushing.Add(h.unflushed.Swap(0)) },
			FlushEnd: func(info pebble.FlushInfo) {
				if info.Err == nil {
					h.flushing.Store(0)
				}
			},
		},
	}
}

// fatalPanic is what pebbleLogger.Fatalf panics with, so the store's own
// calls can tell it from other panics and turn it into an error.
type fatalPanic struct{ err error }

// recoverFatal turns a Pebble fatal (and any other panic of the storage
// engine under a store call) into an error wrapping ErrDamaged or
// ErrUnwritable, in *err. Deferred by every call into Pebble.
func recoverFatal(h *health, err *error) {
	r := recover()
	if r == nil {
		return
	}
	cause, ok := r.(fatalPanic)
	if e, isErr := r.(error); !ok && isErr {
		cause = fatalPanic{fmt.Errorf("pebble panicked: %w", e)} // keep the cause: a full disk is not damage
	} else if !ok {
		cause = fatalPanic{fmt.Errorf("pebble panicked: %v", r)}
	}
	if unwritable(cause.err) {
		*err = h.markUnwritable(cause.err)
		return
	}
	*err = h.markDamaged(cause.err)
}

// classify marks the table by what err says and returns the error to give
// the caller.
func (h *health) classify(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case unwritable(err):
		return h.markUnwritable(err)
	case pebble.IsCorruptionError(err):
		return h.markDamaged(err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// classifyKey is classify for an operation on key, formatting the message
// only for an error (every table write passes through here).
func (h *health) classifyKey(err error, op, key string) error {
	if err == nil {
		return nil
	}
	return h.classify(err, fmt.Sprintf("%s %q", op, key))
}

func (s *pebbleStore) putOffset(b []byte) (err error) {
	if err := s.h.beforeWrite(len(b)); err != nil {
		return err
	}
	defer recoverFatal(s.h, &err)
	return s.h.classify(s.db.Set([]byte(offsetKey), b, pebble.NoSync), "pebble set offset")
}

// pebbleStore is a Goka table in one Pebble database: WAL on, writes not
// synced (the changelog is the source of truth; see the package doc).
type pebbleStore struct {
	db        *pebble.DB
	h         *health
	off       *offsets
	closing   sync.Once
	closeWait time.Duration // 0: pebbleCloseWait
	closeDB   func() error  // nil: s.closePebble (tests replace it)
	mu        sync.Mutex    // closed, against the watch's idle flush
	closed    bool
}

func (s *pebbleStore) Open() error { return nil }

// Close writes the offset, flushes the memtable with FlushOnClose, and
// closes the database, giving up after pebbleCloseWait (the table stays
// open, abandoned: its process is stopping); only the first call does
// anything (Pebble panics on a second close).
func (s *pebbleStore) Close() (err error) {
	s.closing.Do(func() {
		defer s.h.watch.remove(s.h)
		done := make(chan error, 1)
		go func() { done <- s.closeAll() }()
		wait := s.closeWait
		if wait == 0 {
			wait = pebbleCloseWait
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case err = <-done:
		case <-t.C:
			err = fmt.Errorf("closing pebble table %s: not done after %s, abandoned (%v)", s.h.path, wait, s.h.failed())
			s.h.cfg.log.Error("pebble table did not close in time; abandoned", "table", s.h.path, "after", wait)
		}
	})
	return err
}

func (s *pebbleStore) closeAll() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	offErr := s.off.close()
	if s.h.failed() != nil {
		offErr = nil // expected: the table refused it
	}
	if s.h.cfg.flushOnClose && s.h.failed() == nil {
		s.flush()
	}
	closeDB := s.closeDB
	if closeDB == nil {
		closeDB = s.closePebble
	}
	return errors.Join(offErr, closeDB())
}

// flushIdle starts a flush of the memtable (the watch calls it for a table
// that stopped being written).
func (s *pebbleStore) flushIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.h.failed() != nil {
		return
	}
	var err error
	defer recoverFatal(s.h, &err)
	if _, err = s.db.AsyncFlush(); err != nil {
		err = s.h.classify(err, "pebble idle flush")
		s.h.cfg.log.Debug("pebble idle flush", "table", s.h.path, "err", err)
	}
}

// flush writes the memtable out. Best effort: what it does not write stays
// in the log, which the next open replays.
func (s *pebbleStore) flush() {
	var err error
	defer recoverFatal(s.h, &err)
	if err = s.db.Flush(); err != nil {
		s.h.cfg.log.Debug("pebble flush on close", "table", s.h.path, "err", err)
	}
}

func (s *pebbleStore) closePebble() (err error) {
	defer recoverFatal(s.h, &err)
	err = s.db.Close()
	if s.h.failed() != nil {
		return nil // already reported; the table is rebuilt or the process stops
	}
	return err
}

func (s *pebbleStore) Has(key string) (bool, error) {
	v, err := s.Get(key)
	return v != nil, err
}

func (s *pebbleStore) Get(key string) (out []byte, err error) {
	if e := s.h.damaged.Load(); e != nil {
		return nil, *e
	}
	defer recoverFatal(s.h, &err)
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.h.classify(err, fmt.Sprintf("pebble get %q", key))
	}
	out = bytes.Clone(v) // v is only valid until closer.Close
	return out, closer.Close()
}

func (s *pebbleStore) Set(key string, value []byte) (err error) {
	if err := s.h.beforeWrite(len(key) + len(value)); err != nil {
		return err
	}
	defer recoverFatal(s.h, &err)
	return s.h.classifyKey(s.db.Set([]byte(key), value, pebble.NoSync), "pebble set", key)
}

func (s *pebbleStore) Delete(key string) (err error) {
	if err := s.h.beforeWrite(len(key)); err != nil {
		return err
	}
	defer recoverFatal(s.h, &err)
	return s.h.classifyKey(s.db.Delete([]byte(key), pebble.NoSync), "pebble delete", key)
}

func (s *pebbleStore) GetOffset(def int64) (int64, error) {
	return s.off.get(def, func() ([]byte, error) { return s.Get(offsetKey) })
}

func (s *pebbleStore) SetOffset(o int64) error { s.off.set(o); return nil }

func (s *pebbleStore) MarkRecovered() error { return s.off.flush() }

func (s *pebbleStore) Iterator() (storage.Iterator, error) { return s.IteratorWithRange(nil, nil) }

// IteratorWithRange iterates [start, limit), or every key with prefix start
// when limit is empty (Goka's LevelDB semantics).
func (s *pebbleStore) IteratorWithRange(start, limit []byte) (_ storage.Iterator, err error) {
	if e := s.h.damaged.Load(); e != nil {
		return nil, *e
	}
	defer recoverFatal(s.h, &err)
	o := &pebble.IterOptions{}
	switch {
	case len(limit) > 0:
		o.LowerBound, o.UpperBound = start, limit
	case len(start) > 0:
		o.LowerBound, o.UpperBound = start, prefixEnd(start)
	}
	it, err := s.db.NewIter(o)
	if err != nil {
		return nil, s.h.classify(err, "pebble iterator")
	}
	return &pebbleIter{it: it, h: s.h}, nil
}

// prefixEnd is the smallest key greater than every key with prefix p (nil: none).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// pebbleIter adapts Pebble's iterator to Goka's (positioned before the first
// key until Next or Seek), skipping the offset key.
type pebbleIter struct {
	it      *pebble.Iterator
	h       *health
	started bool
	err     error // a Pebble fatal during a move
}

func (i *pebbleIter) skipOffset() bool {
	for i.it.Valid() && string(i.it.Key()) == offsetKey {
		i.it.Next()
	}
	return i.it.Valid()
}

func (i *pebbleIter) Next() (ok bool) {
	defer i.recover(&ok)
	if !i.started {
		i.started = true
		i.it.First()
	} else {
		i.it.Next()
	}
	return i.skipOffset()
}

func (i *pebbleIter) Seek(key []byte) (ok bool) {
	defer i.recover(&ok)
	i.started = true
	i.it.SeekGE(key)
	return i.skipOffset()
}

// recover ends the iteration on a Pebble fatal, keeping the error for Err.
func (i *pebbleIter) recover(ok *bool) {
	if r := recover(); r != nil {
		var err error
		func() { defer recoverFatal(i.h, &err); panic(r) }()
		i.err, *ok = err, false
	}
}

func (i *pebbleIter) Err() error {
	if i.err != nil {
		return i.err
	}
	return i.h.classify(i.it.Error(), "pebble iterator")
}

func (i *pebbleIter) Key() []byte {
	if !i.started || !i.it.Valid() {
		return nil
	}
	return bytes.Clone(i.it.Key())
}

func (i *pebbleIter) Value() ([]byte, error) {
	if !i.started || !i.it.Valid() {
		return nil, nil
	}
	v, err := i.it.ValueAndErr()
	return bytes.Clone(v), i.h.classify(err, "pebble iterator value")
}

func (i *pebbleIter) Release() {
	var err error
	defer recoverFatal(i.h, &err)
	_ = i.it.Close()
}

// pebbleLogger sends Pebble's messages to slog. Pebble calls Fatalf on broken
// internal invariants (and, by default, on corruption: pebbleOptions handles
// that) and expects it not to return: it marks the table and panics with a
// fatalPanic, which every store call recovers into an error. A Fatalf in one
// of Pebble's own goroutines still ends the process, except for a disk that
// refuses writes (see Fatalf).
type pebbleLogger struct {
	l *slog.Logger
	h *health
}

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	for _, a := range args { // Pebble formats its causes with %s/%v: keep them for classification
		if e, ok := a.(error); ok {
			err = errors.Join(err, e)
		}
	}
	p.l.Error("pebble fatal", "table", p.h.path, "err", err)
	if unwritable(err) {
		// A MANIFEST the disk refused, typically in a flush goroutine: a
		// panic there ends the process, and Pebble's state is not safe to go
		// on with. The table is marked (the process stops) and this
		// goroutine waits for the process to end; Close gives up on it.
		_ = p.h.markUnwritable(err)
		select {}
	}
	panic(fatalPanic{err})
}
