package group

import (
	"bytes"
	"sync"

	"github.com/lovoo/goka/storage"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// CacheEnvelopes keeps the decoded table values (envelopes) of g's keys in
// memory, up to budget bytes of their encodings (default: none; the decoded
// objects take a few times that), so a callback on a key this process wrote
// last reads its envelope without a store read or a decode: the kit's
// envelope is then paid for once per write, not once per read as well. It
// asks nothing of handlers (the envelope is the kit's). With CacheStates as
// well, the decoded states are kept in the same entries, under this budget
// (CacheStates' own is then unused). Call it before building the processor.
//
// Invariant: a cached envelope is, field for field, the value the partition's
// local store holds for the key. Only a callback caches one, after the store
// took its write (or when it read the envelope and changed nothing); every
// write to the table's store (a callback's, a recovery's, a hot standby's)
// invalidates the key's entry first; a partition's entries go when its store
// is opened or closed; a callback holds the entry while it runs (no other
// callback can use it) and a callback that fails half-way never hands it
// back. Under Goka's tester, whose SetTableValue writes past the stores the
// kit wraps, an entry is used only while the store's bytes are still those
// it was cached as.
func CacheEnvelopes[S any, PS codecs.Message[S]](g *Group[S, PS], budget int) {
	g.envBudget = max(budget, 0)
}

// envEntry is one key's cached envelope. Entries stay in their partition's
// map while a callback holds them, so a key's next write updates its entry
// in place.
type envEntry struct {
	env *kitpb.Envelope
	// st is env's state decoded (CacheStates), nil when it must be decoded.
	st   any
	size int
	// held: a callback took the entry and has not handed it back; it is
	// used by nobody else (the store may be changing under it).
	held   bool
	stored []byte // the encoding, kept only to verify against the store (tester)
}

type envPart map[string]*envEntry

// envCache is one build's cached envelopes by partition and key; callbacks
// of different partitions (and the stores' writes) meet at the lock.
type envCache struct {
	mu     sync.Mutex
	budget int // bytes of encodings
	used   int
	parts  map[int32]envPart
	// verify: entries keep their encoding and are used only while the store
	// holds it (Goka's tester writes past the wrapped stores). stores are the
	// partitions' stores to verify against.
	verify bool
	stores map[int32]storage.Storage
}

// newEnvCache is one build's cache (nil without a budget).
func newEnvCache(budget int, verify bool) *envCache {
	if budget <= 0 {
		return nil
	}
	return &envCache{budget: budget, parts: map[int32]envPart{}, verify: verify, stores: map[int32]storage.Storage{}}
}

// take holds the key's entry for a callback and returns it (nil: read the
// store).
func (c *envCache) take(partition int32, key string) *envEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	e := c.parts[partition][key]
	if e == nil || e.held {
		c.mu.Unlock()
		return nil
	}
	e.held = true
	st := c.stores[partition]
	c.mu.Unlock()
	if c.verify {
		if st == nil {
			c.forget(partition, key, e)
			return nil
		}
		if b, err := st.Get(key); err != nil || !bytes.Equal(b, e.stored) {
			c.forget(partition, key, e)
			return nil
		}
	}
	return e
}

// put caches env (and its decoded state st, nil: none), which the store
// holds for key as of now, in held (the entry the callback took, nil: none)
// or a new entry; it evicts other keys when full.
func (c *envCache) put(partition int32, key string, held *envEntry, env *kitpb.Envelope, st any) {
	size := once.EncodedSize(env)
	var stored []byte
	if c.verify {
		b, err := encodeEnvelope(env)
		if err != nil {
			c.forget(partition, key, held)
			return
		}
		stored = b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.parts[partition]
	if m == nil {
		m = envPart{}
		c.parts[partition] = m
	}
	e := m[key]
	switch {
	case e != nil && e == held:
	case e != nil: // an entry a failed callback never handed back
	default: // evicted while held, or the partition's store changed
		e = &envEntry{}
		m[key] = e
	}
	c.used += size - e.size
	e.env, e.st, e.size, e.held, e.stored = env, st, size, false, stored
	for c.used > c.budget && c.evictOne(m) {
	}
}

// forget drops held, the key's entry a callback took, when it is not handing
// it back.
func (c *envCache) forget(partition int32, key string, held *envEntry) {
	if c == nil || held == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.parts[partition]; m[key] == held {
		delete(m, key)
		c.used -= held.size
	}
}

// evictOne drops an arbitrary entry (map order), preferring the partition
// being written; false when the cache is empty. Only a full cache gets here:
// starting a range over a map costs more than the rest of a put.
func (c *envCache) evictOne(prefer envPart) bool {
	for k, e := range prefer {
		delete(prefer, k)
		c.used -= e.size
		return true
	}
	for _, m := range c.parts {
		for k, e := range m {
			delete(m, k)
			c.used -= e.size
			return true
		}
	}
	return false
}

// invalidate forgets the key's envelope: the store's value is being
// replaced. A held entry stays held (its callback's put replaces it; if the
// callback fails it is never used again).
func (c *envCache) invalidate(partition int32, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.parts[partition]
	if e := m[key]; e != nil && !e.held {
		delete(m, key)
		c.used -= e.size
	}
}

// dropPartition forgets a partition's entries and, when st is not nil, makes
// it the store entries are verified against.
func (c *envCache) dropPartition(partition int32, st storage.Storage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.parts[partition] {
		c.used -= e.size
	}
	delete(c.parts, partition)
	if st != nil {
		c.stores[partition] = st
	} else {
		delete(c.stores, partition)
	}
}

// storageBuilder wraps the group table's stores so that every write
// invalidates the key's cached envelope, and opening or closing a
// partition's store drops all of the partition's.
func (c *envCache) storageBuilder(table string, inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil || topic != table {
			return st, err
		}
		c.dropPartition(partition, st)
		return &envCachedStorage{Storage: st, c: c, partition: partition}, nil
	}
}

// envCachedStorage is a partition's store of the group table, keeping the
// envelope cache in step with it.
type envCachedStorage struct {
	storage.Storage
	c         *envCache
	partition int32
}

func (s *envCachedStorage) Set(key string, value []byte) error {
	s.c.invalidate(s.partition, key)
	return s.Storage.Set(key, value)
}

func (s *envCachedStorage) Delete(key string) error {
	s.c.invalidate(s.partition, key)
	return s.Storage.Delete(key)
}

func (s *envCachedStorage) Close() error {
	s.c.dropPartition(s.partition, nil)
	return s.Storage.Close()
}
