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
	return func(topic string, partition int32) (storage.Storage, error) {
		path := tablePath(dir, "", topic, partition) // Goka's file name: its tables open here
		db, err := openTable(path, cfg, func() (*leveldb.DB, error) { return leveldb.OpenFile(path, levelDBOptions()) })
		if err != nil {
			return nil, fmt.Errorf("opening leveldb table %s: %w", path, err)
		}
		inner, err := storage.New(db)
		if err != nil {
			return nil, errors.Join(err, db.Close())
		}
		s := &levelDBStore{Storage: inner, db: db}
		s.off = newOffsets(func(b []byte) error { return db.Put([]byte(offsetKey), b, nil) }, cfg.offsetInterval)
		return s, nil
	}
}

// levelDBStore is Goka's LevelDB storage with the offset handled by offsets:
// values, deletes and iteration are Goka's.
type levelDBStore struct {
	storage.Storage
	db      *leveldb.DB
	off     *offsets
	closing sync.Once
}

func (s *levelDBStore) Open() error { return nil } // Goka's Open only starts its own offset ticker

// Close writes the offset and closes the database (the first call only).
func (s *levelDBStore) Close() (err error) {
	s.closing.Do(func() { err = errors.Join(s.off.close(), s.db.Close()) })
	return err
}

func (s *levelDBStore) GetOffset(def int64) (int64, error) {
	return s.off.get(def, func() ([]byte, error) { return s.Storage.Get(offsetKey) })
}

func (s *levelDBStore) SetOffset(o int64) error { s.off.set(o); return nil }

func (s *levelDBStore) MarkRecovered() error { return s.off.flush() }
