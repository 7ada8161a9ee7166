package group

import (
	"bytes"
	"sync"
)

// newStateCache is one build's cache (nil without a budget).
func newStateCache[PS any](budget int) *stateCache[PS] {
	if budget <= 0 {
		return nil
	}
	return &stateCache[PS]{budget: budget, m: map[stateKey]cachedState[PS]{}}
}

type stateKey struct {
	partition int32
	key       string
}

type cachedState[PS any] struct {
	stored []byte // the state's encoding, as written
	st     PS
}

// stateCache is a group's decoded states by key; callbacks of different
// partitions meet at the lock.
type stateCache[PS any] struct {
	mu     sync.Mutex
	budget int // bytes of encodings
	used   int
	m      map[stateKey]cachedState[PS]
}

// take removes the key's cached state and returns it when stored is what it
// was written as (ok false otherwise: decode stored).
func (s *stateCache[PS]) take(partition int32, key string, stored []byte) (st PS, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := stateKey{partition, key}
	e, found := s.m[k]
	if !found {
		return st, false
	}
	delete(s.m, k)
	s.used -= len(e.stored)
	if !bytes.Equal(e.stored, stored) {
		return st, false
	}
	return e.st, true
}

// put caches st, just written as stored, evicting some other key when full.
func (s *stateCache[PS]) put(partition int32, key string, stored []byte, st PS) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(stored) > s.budget {
		return
	}
	k := stateKey{partition, key}
	if e, found := s.m[k]; found {
		s.used -= len(e.stored)
	}
	if s.used+len(stored) > s.budget {
		// Only when full: starting a range over the map costs more than the
		// rest of a put.
		for old, e := range s.m { // map order: an arbitrary key goes
			if s.used+len(stored) <= s.budget {
				break
			}
			delete(s.m, old)
			s.used -= len(e.stored)
		}
	}
	s.m[k] = cachedState[PS]{stored: stored, st: st}
	s.used += len(stored)
}

// drop forgets the key's cached state (its state was deleted).
func (s *stateCache[PS]) drop(partition int32, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := stateKey{partition, key}
	if e, found := s.m[k]; found {
		delete(s.m, k)
		s.used -= len(e.stored)
	}
}
