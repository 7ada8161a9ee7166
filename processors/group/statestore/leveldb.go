package statestore

import (
	"errors"
	"fmt"
	"sync"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// levelDBOptions are goleveldb's defaults with: a bloom filter, so a Get of a
// key not in the table (every new device) skips the table files; larger table
// files, fewer compactions.
func levelDBOptions() *opt.Options {
	return &opt.Options{
		Filter:              filter.NewBloomFilter(10),
		CompactionTableSize: 4 << 20,
	}
}

func levelDBBuilder(dir string, cfg config) storage.Builder {
	watch := newDirWatch(dir, cfg)
	return func(topic string, partition int32) (storage.Storage, error) {
		path := tablePath(dir, "", topic, partition) // Goka's file name: its tables open here
		h := &health{path: path, cfg: cfg, watch: watch}
		if err := watch.add(h); err != nil {
			return nil, fmt.Errorf("opening leveldb table %s: %w", path, err)
		}
		db, err := openTable(path, cfg, func() (*leveldb.DB, error) { return leveldb.OpenFile(path, levelDBOptions()) })
		if err != nil {
			watch.remove(h)
			return nil, fmt.Errorf("opening leveldb table %s: %w", path, err)
		}
		inner, err := storage.New(db)
		if err != nil {
			watch.remove(h)
			return nil, errors.Join(err, db.Close())
		}
		s := &levelDBStore{Storage: inner, db: db, h: h}
		s.off = newOffsets(func(b []byte) error {
			if err := h.beforeWrite(len(b)); err != nil {
				return err
			}
			return s.written(db.Put([]byte(offsetKey), b, nil))
		}, cfg.offsetInterval)
		return s, nil
	}
}

// levelDBStore is Goka's LevelDB storage with the offset handled by offsets
// and writes checked against the directory's watch: values, deletes and
// iteration are Goka's.
type levelDBStore struct {
	storage.Storage
	db      *leveldb.DB
	h       *health
	off     *offsets
	closing sync.Once
}

func (s *levelDBStore) Open() error { return nil } // Goka's Open only starts its own offset ticker

// Close writes the offset and closes the database (the first call only).
func (s *levelDBStore) Close() (err error) {
	s.closing.Do(func() {
		defer s.h.watch.remove(s.h)
		offErr := s.off.close()
		if s.h.failed() != nil {
			offErr = nil // expected: the table refused it
		}
		err = errors.Join(offErr, s.db.Close())
	})
	return err
}

// written marks the table unwritable when err says the disk refused a write.
func (s *levelDBStore) written(err error) error {
	if err != nil && unwritable(err) {
		return s.h.markUnwritable(err)
	}
	return err
}

func (s *levelDBStore) Set(key string, value []byte) error {
	if err := s.h.beforeWrite(len(key) + len(value)); err != nil {
		return err
	}
	return s.written(s.Storage.Set(key, value))
}

func (s *levelDBStore) Delete(key string) error {
	if err := s.h.beforeWrite(len(key)); err != nil {
		return err
	}
	return s.written(s.Storage.Delete(key))
}

func (s *levelDBStore) GetOffset(def int64) (int64, error) {
	return s.off.get(def, func() ([]byte, error) { return s.Storage.Get(offsetKey) })
}

func (s *levelDBStore) SetOffset(o int64) error { s.off.set(o); return nil }

func (s *levelDBStore) MarkRecovered() error { return s.off.flush() }
