package fences

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Catalogue holds the current fence set. Readers take a Snapshot (one
// atomic load) and never wait for writers. Apply copies the parts of the
// copy-on-write index a batch touches (the id shards and grid shards of the
// fences it changes, O(1) per fence of typical size; a batch as large as a
// quarter of the catalogue, or the first one, is indexed afresh in one bulk
// build instead) and publishes the result as a new immutable Snapshot with
// one atomic store; the parts it did not touch are shared with older
// snapshots, never modified. All methods are safe for concurrent use. The
// zero Catalogue is empty and ready to use.
type Catalogue struct {
	mu  sync.Mutex // serialises writers; guards hyst
	cur atomic.Pointer[Snapshot]
	// hyst counts fences by HysteresisM override, so a delete of the
	// largest one finds the next largest without a scan of the fences.
	hyst map[float64]int
	// held has every fence id any applied batch upserted, deleted since or not:
	// a trigger may name a fence deleted after it fired, never one the
	// catalogue has not held.
	held sync.Map // string → struct{}
}

// EverHeld reports whether the catalogue has held the fence at any version.
func (c *Catalogue) EverHeld(id string) bool {
	_, ok := c.held.Load(id)
	return ok
}

// New returns an empty catalogue at version 0.
func New() *Catalogue {
	c := &Catalogue{}
	c.cur.Store(emptySnapshot())
	return c
}

// Snapshot returns the current, immutable fence set.
func (c *Catalogue) Snapshot() *Snapshot {
	if s := c.cur.Load(); s != nil {
		return s
	}
	return empty
}

// Version returns the current catalogue version.
func (c *Catalogue) Version() uint64 { return c.Snapshot().version }

// bulkFraction: a batch changing at least 1/bulkFraction of the fences
// held is indexed by a bulk build (which also re-sizes the grid's cells for
// the fences now held, and lays cells out contiguously) rather than fence
// by fence.
const bulkFraction = 4

// Apply applies a batch atomically and stamps it with version: deletes
// first, then upserts (so an id in both ends up present; among upserts
// with the same id the last wins). Deleting an unknown id is a no-op, as
// replaying a compacted topic produces such tombstones. Upserts built by
// this package are used as they are; hand-built ones are validated here.
// On error (an invalid upsert, as *FenceError with its batch index, or a
// version lower than the current one: ErrVersionRegressed) nothing is
// applied and readers keep the previous snapshot. An equal version is
// accepted: the caller owns version numbering. The cost grows with the k
// fences changed, not with the n held (plus a fixed ~40 KB of shard headers
// copied per batch).
func (c *Catalogue) Apply(version uint64, upserts []Fence, deletes []string) error {
	// Validate outside the lock: it is the expensive part.
	ups := make([]Fence, len(upserts))
	for i := range upserts {
		ups[i] = upserts[i]
		if ups[i].geo == nil {
			if err := ups[i].validate(i); err != nil {
				return err
			}
		} else if err := validateID(ups[i].ID); err != nil {
			return &FenceError{Index: i, ID: ups[i].ID, Err: err}
		}
	}
	// One change per id: nil deletes, otherwise the last upsert wins.
	ops := make(map[string]*entry, len(ups)+len(deletes))
	for _, id := range deletes {
		ops[id] = nil
	}
	for i := range ups {
		ops[ups[i].ID] = newEntry(ups[i])
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.Snapshot()
	if version < old.version {
		return fmt.Errorf("%w: apply version %d, catalogue is at %d", ErrVersionRegressed, version, old.version)
	}
	for i := range ups {
		c.held.Store(ups[i].ID, struct{}{})
	}
	var s *Snapshot
	if old.n == 0 || len(ops)*bulkFraction >= old.n {
		s = c.rebuild(old, ops)
	} else {
		s = c.update(old, ops)
	}
	s.version = version
	c.cur.Store(s)
	return nil
}

// update changes the fences in ops one by one: each shard of the id index
// and of the grid it touches is copied once, and each changed cell gets a
// new item slice.
func (c *Catalogue) update(old *Snapshot, ops map[string]*entry) *Snapshot {
	s := &Snapshot{n: old.n, shards: old.shards, maxHysteresis: old.maxHysteresis, idx: old.idx, crossing: old.crossing}
	gw := &gridWriter{g: &s.idx}
	var copied [shardCount]bool
	maxGone := false
	for id, e := range ops {
		i := shardOf(id)
		prev := s.shards[i][id]
		if prev == nil && e == nil {
			continue
		}
		if !copied[i] {
			copied[i] = true
			m := make(map[string]*entry, len(s.shards[i])+1)
			maps.Copy(m, s.shards[i])
			s.shards[i] = m
		}
		if prev != nil {
			gw.remove(prev)
			if h := prev.f.Settings.HysteresisM; h >= s.maxHysteresis {
				maxGone = true
			}
			c.countHysteresis(prev.f.Settings.HysteresisM, -1)
			s.crossing -= b2i(prev.f.Settings.Crossing)
			delete(s.shards[i], id)
			s.n--
		}
		if e != nil {
			gw.insert(e)
			c.countHysteresis(e.f.Settings.HysteresisM, 1)
			s.maxHysteresis = math.Max(s.maxHysteresis, e.f.Settings.HysteresisM)
			s.crossing += b2i(e.f.Settings.Crossing)
			s.shards[i][id] = e
			s.n++
		}
	}
	if maxGone {
		s.maxHysteresis = 0
		for h := range c.hyst {
			s.maxHysteresis = math.Max(s.maxHysteresis, h)
		}
	}
	return s
}

// rebuild indexes the old fences changed by ops from scratch.
func (c *Catalogue) rebuild(old *Snapshot, ops map[string]*entry) *Snapshot {
	s := &Snapshot{}
	var all []*entry
	for i := range old.shards {
		for id, e := range old.shards[i] {
			if _, changed := ops[id]; !changed {
				all = append(all, e)
			}
		}
	}
	for _, e := range ops {
		if e != nil {
			all = append(all, e)
		}
	}
	c.hyst = map[float64]int{}
	for _, e := range all {
		i := shardOf(e.f.ID)
		if s.shards[i] == nil {
			s.shards[i] = map[string]*entry{}
		}
		s.shards[i][e.f.ID] = e
		c.countHysteresis(e.f.Settings.HysteresisM, 1)
		s.maxHysteresis = math.Max(s.maxHysteresis, e.f.Settings.HysteresisM)
		s.crossing += b2i(e.f.Settings.Crossing)
	}
	s.n = len(all)
	s.idx = buildGrid(all)
	return s
}

func (c *Catalogue) countHysteresis(h float64, d int) {
	if c.hyst == nil {
		c.hyst = map[float64]int{}
	}
	if c.hyst[h] += d; c.hyst[h] <= 0 {
		delete(c.hyst, h)
	}
}

// Snapshot is one immutable version of the catalogue. It is safe for
// concurrent use, and valid for as long as it is referenced, whatever
// Apply does meanwhile.
type Snapshot struct {
	version uint64
	n       int
	// shards is the id index, split so that an update copies only the
	// maps it touches (a few hundred entries each at 100,000 fences).
	shards        [shardCount]map[string]*entry
	idx           grid
	maxHysteresis float64
	crossing      int // fences with Settings.Crossing on

	sortOnce sync.Once
	sorted   []Fence // by ID; built by the first All
}

// shardCount: 1024 map pointers copied per update against ~100 entries
// per shard copied at 100,000 fences.
const shardCount = 1024

func shardOf(id string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return int(h % shardCount)
}

// entry is one indexed fence. A fence whose box crosses the antimeridian
// is in the grid twice (split); Near de-duplicates those. rects come
// first: a lookup reads them just before it hands out f.
type entry struct {
	rects  [2]rect
	nrects int
	f      Fence
}

func newEntry(f Fence) *entry {
	e := &entry{f: f}
	e.rects, e.nrects = f.geo.bounds.entries()
	return e
}

// empty is the snapshot of a zero Catalogue; shared, as snapshots are
// immutable.
var empty = emptySnapshot()

func emptySnapshot() *Snapshot { return &Snapshot{} }

// Version is the catalogue version this snapshot was applied with.
func (s *Snapshot) Version() uint64 { return s.version }

// Len is the number of fences.
func (s *Snapshot) Len() int { return s.n }

// MaxHysteresisM is the largest per-fence HysteresisM setting (0 if none
// overrides it); the debouncer adds it to its Near margin.
func (s *Snapshot) MaxHysteresisM() float64 { return s.maxHysteresis }

// CrossingFences is the number of fences with Settings.Crossing on; the
// debouncer looks for crossings only when it or its default is non-zero.
func (s *Snapshot) CrossingFences() int { return s.crossing }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Get returns the fence with the given id.
func (s *Snapshot) Get(id string) (Fence, bool) {
	e, ok := s.shards[shardOf(id)][id]
	if !ok {
		return Fence{}, false
	}
	return e.f, true
}

// All returns every fence, sorted by id, in a new slice. The first call on
// a snapshot sorts (O(n log n)); later ones copy.
func (s *Snapshot) All() []Fence {
	s.sortOnce.Do(func() {
		s.sorted = make([]Fence, 0, s.n)
		for i := range s.shards {
			for _, e := range s.shards[i] {
				s.sorted = append(s.sorted, e.f)
			}
		}
		slices.SortFunc(s.sorted, func(a, b Fence) int { return strings.Compare(a.ID, b.ID) })
	})
	return slices.Clone(s.sorted)
}

// Near calls fn for every fence whose box, grown by marginM metres, contains
// (lat, lon) (see Bounds.ContainsPoint), once each and in no particular
// order, until fn returns false. That includes every fence within marginM
// metres of the point, so a caller passing its largest hysteresis plus the
// ping's accuracy also sees the fences it is just outside of. The *Fence
// points into the snapshot: do not modify it. Near does not allocate.
func (s *Snapshot) Near(lat, lon, marginM float64, fn func(f *Fence) bool) {
	if s.n == 0 || fn == nil {
		return
	}
	q, ok := makeQuery(lat, lon, marginM)
	if !ok {
		return
	}
	s.idx.near(&q, fn)
}
