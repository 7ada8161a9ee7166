package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// redisTimeout bounds every Redis call: a store that hangs would hold a
// partition's callback forever.
const redisTimeout = 10 * time.Second

// RedisServer is the server (host:port) and key namespace of the Redis kind
// (default: none; Builder(Redis, ...) refuses to build without it). A table's
// values are one hash, <namespace>:<topic>:<partition>, and its offset the
// string <namespace>:<topic>:<partition>:offset, so tables and processes that
// share a server never see each other's keys unless they share a namespace.
// The other kinds ignore it.
func RedisServer(addr, namespace string) Opt {
	return func(c *config) { c.redisAddr, c.redisNS = addr, namespace }
}

// redisBuilder opens one client per table: Goka opens and closes tables at
// each rebalance, and a table that owns its client closes it with itself.
func redisBuilder(cfg config) (storage.Builder, error) {
	if cfg.redisAddr == "" || cfg.redisNS == "" {
		return nil, errors.New("storage redis: RedisServer(addr, namespace) is required")
	}
	return func(topic string, partition int32) (storage.Storage, error) {
		c := redis.NewClient(&redis.Options{
			Addr:     cfg.redisAddr,
			PoolSize: 4, // one writer per partition; views read concurrently
			// A plain server: no CLIENT SETINFO or maintenance handshakes
			// that Debian's redis-server 7.0 answers with errors.
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		name := fmt.Sprintf("%s:%s:%d", cfg.redisNS, topic, partition)
		s := &redisStore{c: c, hash: name, offKey: name + ":offset"}
		s.off = newOffsets(func(b []byte) error {
			ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
			defer cancel()
			return s.c.Set(ctx, s.offKey, b, 0).Err()
		}, cfg.offsetInterval)
		return s, nil
	}, nil
}

// redisStore is a Goka table in a Redis hash. Every Get, Set, Has and Delete
// is one round trip; the offset is deferred as in the local stores (see the
// package doc). The invariant holds because a Set returns only after the
// server applied it, and the server applies one client's commands in the
// order they arrive: the offset written later never covers a value not yet
// applied.
type redisStore struct {
	c       *redis.Client
	hash    string
	offKey  string
	off     *offsets
	closing sync.Once
}

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), redisTimeout)
}

// Open checks the server answers, so a wrong address fails the table's
// recovery instead of its first record.
func (s *redisStore) Open() error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", s.c.Options().Addr, err)
	}
	return nil
}

// Close writes the offset and closes the client (the first call only).
func (s *redisStore) Close() (err error) {
	s.closing.Do(func() { err = errors.Join(s.off.close(), s.c.Close()) })
	return err
}

func (s *redisStore) MarkRecovered() error { return s.off.flush() }

func (s *redisStore) Has(key string) (bool, error) {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return s.c.HExists(ctx, s.hash, key).Result()
}

func (s *redisStore) Get(key string) ([]byte, error) {
	ctx, cancel := ctxTimeout()
	defer cancel()
	v, err := s.c.HGet(ctx, s.hash, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

func (s *redisStore) Set(key string, value []byte) error {
	if value == nil {
		return fmt.Errorf("redis set %q: nil value", key)
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	return s.c.HSet(ctx, s.hash, key, value).Err()
}

func (s *redisStore) Delete(key string) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	return s.c.HDel(ctx, s.hash, key).Err()
}

func (s *redisStore) GetOffset(def int64) (int64, error) {
	return s.off.get(def, func() ([]byte, error) {
		ctx, cancel := ctxTimeout()
		defer cancel()
		b, err := s.c.Get(ctx, s.offKey).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return b, err
	})
}

func (s *redisStore) SetOffset(o int64) error { s.off.set(o); return nil }

func (s *redisStore) Iterator() (storage.Iterator, error) { return s.IteratorWithRange(nil, nil) }

// IteratorWithRange snapshots the keys and values in [start, limit), or with
// prefix start when limit is empty, in key order. HSCAN walks the hash in
// pages without blocking the server; it may return a field twice, never
// omits one that stays, and a field written during the scan may or may not
// be seen, as in a snapshot taken at some moment of it.
func (s *redisStore) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*redisTimeout)
	defer cancel()
	vals := map[string][]byte{}
	var cursor uint64
	for {
		page, next, err := s.c.HScan(ctx, s.hash, cursor, "", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("redis hscan %s: %w", s.hash, err)
		}
		for i := 0; i+1 < len(page); i += 2 {
			kb := []byte(page[i])
			if len(limit) > 0 {
				if bytes.Compare(kb, start) < 0 || bytes.Compare(kb, limit) >= 0 {
					continue
				}
			} else if !bytes.HasPrefix(kb, start) {
				continue
			}
			vals[page[i]] = []byte(page[i+1])
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return &redisIter{keys: keys, vals: vals, pos: -1}, nil
}

type redisIter struct {
	keys []string
	vals map[string][]byte
	pos  int
}

func (i *redisIter) valid() bool { return i.pos >= 0 && i.pos < len(i.keys) }
func (i *redisIter) Next() bool  { i.pos++; return i.valid() }
func (i *redisIter) Err() error  { return nil }
func (i *redisIter) Release()    { i.pos, i.vals = len(i.keys), nil }

func (i *redisIter) Key() []byte {
	if !i.valid() {
		return nil
	}
	return []byte(i.keys[i.pos])
}

func (i *redisIter) Value() ([]byte, error) {
	if !i.valid() {
		return nil, nil
	}
	return i.vals[i.keys[i.pos]], nil
}

func (i *redisIter) Seek(key []byte) bool {
	i.pos = sort.SearchStrings(i.keys, string(key))
	return i.valid()
}
