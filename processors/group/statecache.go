package group

import (
	"bytes"
	"sync"

	"github.com/fencestream/fencestream/codecs"
)

// CacheStates keeps decoded states of g's keys in memory, up to budget bytes
// of their encodings (default: none; the decoded objects take a few times
// that), so a callback whose key's stored state is, byte for byte, what this
// process last wrote for it gets that object from State instead of decoding
// it again. The stored bytes decide, so a key another instance wrote, or one
// rebuilt from the changelog, is decoded as before.
//
// It is for handlers that treat their state as theirs only during the
// callback: State hands the object over, SetState hands it back (it is
// cached when the write is made), and a handler must not keep it, or change
// it after SetState, once the callback returns. A state that State returned
// and SetState did not take back is not cached. Call it before building the
// processor.
func CacheStates[S any, PS codecs.Message[S]](g *Group[S, PS], budget int) {
	g.stateBudget = max(budget, 0)
}

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
