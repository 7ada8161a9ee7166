package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lovoo/goka/storage"
)

// pebbleCacheBytes is the block cache shared by every table of one builder (a
// process runs 24 partitions; a cache each would multiply it).
const pebbleCacheBytes = 64 << 20

// pebbleMemTableBytes is the default memtable size of one table.
const pebbleMemTableBytes = 4 << 20

func pebbleBuilder(dir string, cfg config) storage.Builder {
	cacheBytes, memTable := int64(pebbleCacheBytes), pebbleMemTableBytes
	if cfg.cache > 0 {
		cacheBytes = cfg.cache
	}
	if cfg.memTable > 0 {
		memTable = cfg.memTable
	}
	cache := pebble.NewCache(cacheBytes) // lives as long as the builder: one per process
	return func(topic string, partition int32) (storage.Storage, error) {
		opts := &pebble.Options{
			Cache:        cache,
			MemTableSize: uint64(memTable),
			Logger:       pebbleLogger{cfg.log},
		}
		path := tablePath(dir, ".pebble", topic, partition)
		db, err := pebble.Open(path, opts)
		if err != nil {
			return nil, fmt.Errorf("opening pebble table %s: %w", path, err)
		}
		s := &pebbleStore{db: db}
		s.off = newOffsets(func(b []byte) error { return db.Set([]byte(offsetKey), b, pebble.NoSync) }, cfg.offsetInterval)
		return s, nil
	}
}

// pebbleStore is a Goka table in one Pebble database: WAL on, writes not
// synced (the changelog is the source of truth; see the package doc).
type pebbleStore struct {
	db      *pebble.DB
	off     *offsets
	closing sync.Once
}

func (s *pebbleStore) Open() error { return nil }

// Close writes the offset and closes the database; only the first call does
// anything (Pebble panics on a second close).
func (s *pebbleStore) Close() (err error) {
	s.closing.Do(func() { err = errors.Join(s.off.close(), s.db.Close()) })
	return err
}

func (s *pebbleStore) Has(key string) (bool, error) {
	v, err := s.Get(key)
	return v != nil, err
}

func (s *pebbleStore) Get(key string) ([]byte, error) {
	v, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebble get %q: %w", key, err)
	}
	out := bytes.Clone(v) // v is only valid until closer.Close
	return out, closer.Close()
}

func (s *pebbleStore) Set(key string, value []byte) error {
	if err := s.db.Set([]byte(key), value, pebble.NoSync); err != nil {
		return fmt.Errorf("pebble set %q: %w", key, err)
	}
	return nil
}

func (s *pebbleStore) Delete(key string) error {
	if err := s.db.Delete([]byte(key), pebble.NoSync); err != nil {
		return fmt.Errorf("pebble delete %q: %w", key, err)
	}
	return nil
}

func (s *pebbleStore) GetOffset(def int64) (int64, error) {
	return s.off.get(def, func() ([]byte, error) { return s.Get(offsetKey) })
}

func (s *pebbleStore) SetOffset(o int64) error { s.off.set(o); return nil }

func (s *pebbleStore) MarkRecovered() error { return s.off.flush() }

func (s *pebbleStore) Iterator() (storage.Iterator, error) { return s.IteratorWithRange(nil, nil) }

// IteratorWithRange iterates [start, limit), or every key with prefix start
// when limit is empty (Goka's LevelDB semantics).
func (s *pebbleStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	o := &pebble.IterOptions{}
	switch {
	case len(limit) > 0:
		o.LowerBound, o.UpperBound = start, limit
	case len(start) > 0:
		o.LowerBound, o.UpperBound = start, prefixEnd(start)
	}
	it, err := s.db.NewIter(o)
	if err != nil {
		return nil, fmt.Errorf("pebble iterator: %w", err)
	}
	return &pebbleIter{it: it}, nil
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
	started bool
}

func (i *pebbleIter) skipOffset() bool {
	for i.it.Valid() && string(i.it.Key()) == offsetKey {
		i.it.Next()
	}
	return i.it.Valid()
}

func (i *pebbleIter) Next() bool {
	if !i.started {
		i.started = true
		i.it.First()
	} else {
		i.it.Next()
	}
	return i.skipOffset()
}

func (i *pebbleIter) Seek(key []byte) bool {
	i.started = true
	i.it.SeekGE(key)
	return i.skipOffset()
}

func (i *pebbleIter) Err() error { return i.it.Error() }

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
	return bytes.Clone(v), err
}

func (i *pebbleIter) Release() { _ = i.it.Close() }

// pebbleLogger sends Pebble's messages to slog. Pebble calls Fatalf on broken
// internal invariants and expects it not to return.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic("pebble: " + msg)
}
