package group

import (
	"bytes"
	"sync"

	"github.com/lovoo/goka/storage"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// CacheEnvelopes keeps the decoded table values (envelopes) of g's keys in
// memory, up to budget bytes of their encodings (default: none; the decoded
// objects take a few times that), so a callback on a key this process wrote
// last reads its envelope without a store read or a decode: the cost of the
// kit's envelope is then paid once per write, not once per read as well. It
// asks nothing of handlers (the envelope is the kit's). Call it before
// building the processor.
//
// Invariant: a cached envelope is, field for field, the value the partition's
// local store holds for the key. Only a callback's write caches one (after
// the store took it); every write to the table's store (a callback's, a
// recovery's, a hot standby's) drops the key's entry first; a partition's
// entries go when its store is opened or closed; a callback takes the entry
// out while it runs and puts it back only if it wrote the envelope or left
// it untouched. Under Goka's tester, whose SetTableValue writes past the
// stores the kit wraps, an entry is used only while the store's bytes are
// still those it was cached as.
func CacheEnvelopes[S any, PS codecs.Message[S]](g *Group[S, PS], budget int) {
	g.envBudget = max(budget, 0)
}

// cachedSize is the size of an envelope just encoded (encodeEnvelope leaves
// every size cache filled), read without a second pass over it.
var cachedSize = protov2.MarshalOptions{Deterministic: true, UseCachedSize: true}

type cachedEnv struct {
	env    *kitpb.Envelope
	size   int
	stored []byte // the encoding, kept only to verify against the store (tester)
}

// envCache is one build's cached envelopes by partition and key; callbacks
// of different partitions (and the stores' writes) meet at the lock.
type envCache struct {
	mu     sync.Mutex
	budget int // bytes of encodings
	used   int
	parts  map[int32]map[string]cachedEnv
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
	return &envCache{budget: budget, parts: map[int32]map[string]cachedEnv{}, verify: verify, stores: map[int32]storage.Storage{}}
}

// take removes the key's cached envelope and returns it (ok false: read the
// store).
func (c *envCache) take(partition int32, key string) (*kitpb.Envelope, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	m := c.parts[partition]
	e, found := m[key]
	if !found {
		c.mu.Unlock()
		return nil, false
	}
	delete(m, key)
	c.used -= e.size
	st := c.stores[partition]
	c.mu.Unlock()
	if c.verify {
		if st == nil {
			return nil, false
		}
		if b, err := st.Get(key); err != nil || !bytes.Equal(b, e.stored) {
			return nil, false
		}
	}
	return e.env, true
}

// put caches env, which the store holds for key as of now, evicting other
// keys when full.
func (c *envCache) put(partition int32, key string, env *kitpb.Envelope) {
	size := len(envelopeMagic) + cachedSize.Size(env)
	var stored []byte
	if c.verify {
		b, err := encodeEnvelope(env)
		if err != nil {
			return
		}
		stored = b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget {
		return
	}
	m := c.parts[partition]
	if m == nil {
		m = map[string]cachedEnv{}
		c.parts[partition] = m
	}
	if e, found := m[key]; found {
		c.used -= e.size
	}
	for c.used+size > c.budget && c.evictOne(m) {
	}
	m[key] = cachedEnv{env: env, size: size, stored: stored}
	c.used += size
}

// evictOne drops an arbitrary entry (map order), preferring the partition
// being written; false when the cache is empty.
func (c *envCache) evictOne(prefer map[string]cachedEnv) bool {
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

// drop forgets the key's entry (its stored value is being replaced).
func (c *envCache) drop(partition int32, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.parts[partition]
	if e, found := m[key]; found {
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

// storageBuilder wraps the group table's stores so that every write drops
// the key's cached envelope, and opening or closing a partition's store drops
// all of the partition's.
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
	s.c.drop(s.partition, key)
	return s.Storage.Set(key, value)
}

func (s *envCachedStorage) Delete(key string) error {
	s.c.drop(s.partition, key)
	return s.Storage.Delete(key)
}

func (s *envCachedStorage) Close() error {
	s.c.dropPartition(s.partition, nil)
	return s.Storage.Close()
}
