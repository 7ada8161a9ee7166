package statestore

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/lovoo/goka/storage"
)

// memoryBuilder keeps one table per topic and partition for the life of the
// builder: Goka closes every table at each rebalance and reopens those it
// keeps, and a table that outlives Close only catches up from its offset
// instead of replaying the whole changelog. Goka's own memory storage also
// sorts its key list on every insert, which is quadratic in the table size.
func memoryBuilder() storage.Builder {
	var (
		mu     sync.Mutex
		tables = map[string]*memoryStore{}
	)
	return func(topic string, partition int32) (storage.Storage, error) {
		mu.Lock()
		defer mu.Unlock()
		id := fmt.Sprintf("%s/%d", topic, partition)
		if t, ok := tables[id]; ok {
			return t, nil
		}
		t := &memoryStore{values: map[string][]byte{}}
		tables[id] = t
		return t, nil
	}
}

type memoryStore struct {
	mu     sync.RWMutex
	values map[string][]byte
	offset int64
}

func (m *memoryStore) Open() error          { return nil }
func (m *memoryStore) Close() error         { return nil } // kept for the next open; see memoryBuilder
func (m *memoryStore) MarkRecovered() error { return nil }

func (m *memoryStore) Has(key string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.values[key]
	return ok, nil
}

func (m *memoryStore) Get(key string) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.values[key], nil
}

func (m *memoryStore) Set(key string, value []byte) error {
	if value == nil {
		return fmt.Errorf("memory set %q: nil value", key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[key] = value
	return nil
}

func (m *memoryStore) Delete(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, key)
	return nil
}

func (m *memoryStore) GetOffset(def int64) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.offset == 0 {
		return def, nil
	}
	return m.offset, nil
}

func (m *memoryStore) SetOffset(o int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offset = o
	return nil
}

func (m *memoryStore) Iterator() (storage.Iterator, error) { return m.IteratorWithRange(nil, nil) }

// IteratorWithRange snapshots the keys in [start, limit), or with prefix start
// when limit is empty, in order; values are read as the iterator reaches them.
func (m *memoryStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	m.mu.RLock()
	keys := make([]string, 0, len(m.values))
	for k := range m.values {
		kb := []byte(k)
		if len(limit) > 0 {
			if bytes.Compare(kb, start) < 0 || bytes.Compare(kb, limit) >= 0 {
				continue
			}
		} else if !bytes.HasPrefix(kb, start) {
			continue
		}
		keys = append(keys, k)
	}
	m.mu.RUnlock()
	slices.Sort(keys)
	return &memoryIter{m: m, keys: keys, pos: -1}, nil
}

type memoryIter struct {
	m    *memoryStore
	keys []string
	pos  int
}

func (i *memoryIter) valid() bool { return i.pos >= 0 && i.pos < len(i.keys) }
func (i *memoryIter) Next() bool  { i.pos++; return i.valid() }
func (i *memoryIter) Err() error  { return nil }
func (i *memoryIter) Release()    { i.pos = len(i.keys) }

func (i *memoryIter) Key() []byte {
	if !i.valid() {
		return nil
	}
	return []byte(i.keys[i.pos])
}

func (i *memoryIter) Value() ([]byte, error) {
	if !i.valid() {
		return nil, nil
	}
	return i.m.Get(i.keys[i.pos])
}

func (i *memoryIter) Seek(key []byte) bool {
	i.pos = sort.SearchStrings(i.keys, string(key))
	return i.valid()
}
