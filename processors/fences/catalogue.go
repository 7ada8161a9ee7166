package fences

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/rtree"
)

// Catalogue holds the current fence set. Readers take a Snapshot (one
// atomic load) and never wait for writers; Apply builds a complete new
// Snapshot aside and publishes it with one atomic store. All methods are
// safe for concurrent use. The zero Catalogue is empty and ready to use.
type Catalogue struct {
	mu  sync.Mutex // serialises writers only
	cur atomic.Pointer[Snapshot]
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

// Apply applies a batch atomically and stamps it with version: deletes
// first, then upserts (so an id in both ends up present; among upserts
// with the same id the last wins). Deleting an unknown id is a no-op, as
// replaying a compacted topic produces such tombstones. Upserts built by
// this package are used as they are; hand-built ones are validated here.
// On error (an invalid upsert, as *FenceError with its batch index, or a
// version lower than the current one: ErrVersionRegressed) nothing is
// applied and readers keep the previous snapshot. An equal version is
// accepted: the caller owns version numbering.
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

	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.Snapshot()
	if version < old.version {
		return fmt.Errorf("%w: apply version %d, catalogue is at %d", ErrVersionRegressed, version, old.version)
	}
	byID := make(map[string]Fence, len(old.fences)+len(ups))
	for _, f := range old.fences {
		byID[f.ID] = f
	}
	for _, id := range deletes {
		delete(byID, id)
	}
	for _, f := range ups {
		byID[f.ID] = f
		c.held.Store(f.ID, struct{}{})
	}
	c.cur.Store(buildSnapshot(version, byID))
	return nil
}

// Snapshot is one immutable version of the catalogue. It is safe for
// concurrent use, and valid for as long as it is referenced, whatever
// Apply does meanwhile.
type Snapshot struct {
	version       uint64
	fences        []Fence // sorted by ID
	index         map[string]int32
	tree          rtree.RTreeG[uint32]
	maxHysteresis float64
}

// splitEntry flags index entries of fences stored twice because their box
// crosses the antimeridian; Near de-duplicates those.
const splitEntry = 1 << 31

// empty is the snapshot of a zero Catalogue; shared, as snapshots are
// immutable.
var empty = emptySnapshot()

func emptySnapshot() *Snapshot {
	return &Snapshot{index: map[string]int32{}}
}

func buildSnapshot(version uint64, byID map[string]Fence) *Snapshot {
	s := &Snapshot{version: version, fences: make([]Fence, 0, len(byID)), index: make(map[string]int32, len(byID))}
	for _, f := range byID {
		s.fences = append(s.fences, f)
	}
	slices.SortFunc(s.fences, func(a, b Fence) int { return strings.Compare(a.ID, b.ID) })
	type entry struct {
		r    rect
		data uint32
		key  uint64
	}
	ents := make([]entry, 0, len(s.fences))
	for i := range s.fences {
		f := &s.fences[i]
		s.index[f.ID] = int32(i)
		s.maxHysteresis = math.Max(s.maxHysteresis, f.Settings.HysteresisM)
		rs, n := f.geo.bounds.entries()
		data := uint32(i)
		if n > 1 {
			data |= splitEntry
		}
		for _, r := range rs[:n] {
			ents = append(ents, entry{r: r, data: data, key: hilbertKey((r.min[0]+r.max[0])/2, (r.min[1]+r.max[1])/2)})
		}
	}
	// Inserting in Hilbert order packs nearby fences into the same leaves:
	// tighter nodes, fewer rectangles tested per search.
	slices.SortFunc(ents, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
	for _, e := range ents {
		s.tree.Insert(e.r.min, e.r.max, e.data)
	}
	return s
}

// hilbertKey maps lon/lat to a position on a Hilbert curve over the world
// (16 bits per axis).
func hilbertKey(lon, lat float64) uint64 {
	const n = 1 << 16
	x := uint32(math.Min((lon+180)/360*n, n-1))
	y := uint32(math.Min((lat+90)/180*n, n-1))
	var d uint64
	for s := uint32(n / 2); s > 0; s /= 2 {
		var rx, ry uint32
		if x&s != 0 {
			rx = 1
		}
		if y&s != 0 {
			ry = 1
		}
		d += uint64(s) * uint64(s) * uint64((3*rx)^ry)
		if ry == 0 {
			if rx == 1 {
				x, y = n-1-x, n-1-y
			}
			x, y = y, x
		}
	}
	return d
}

// Version is the catalogue version this snapshot was applied with.
func (s *Snapshot) Version() uint64 { return s.version }

// Len is the number of fences.
func (s *Snapshot) Len() int { return len(s.fences) }

// MaxHysteresisM is the largest per-fence HysteresisM setting (0 if none
// overrides it); the debouncer adds it to its Near margin.
func (s *Snapshot) MaxHysteresisM() float64 { return s.maxHysteresis }

// Get returns the fence with the given id.
func (s *Snapshot) Get(id string) (Fence, bool) {
	i, ok := s.index[id]
	if !ok {
		return Fence{}, false
	}
	return s.fences[i], true
}

// All returns every fence, sorted by id, in a new slice.
func (s *Snapshot) All() []Fence { return slices.Clone(s.fences) }

// Near calls fn for every fence whose box, grown by marginM metres, contains
// (lat, lon) (see Bounds.ContainsPoint), once each and in no particular
// order, until fn returns false. That includes every fence within marginM
// metres of the point, so a caller passing its largest hysteresis plus the
// ping's accuracy also sees the fences it is just outside of. The *Fence
// points into the snapshot: do not modify it. Near does not allocate.
func (s *Snapshot) Near(lat, lon, marginM float64, fn func(f *Fence) bool) {
	if len(s.fences) == 0 || fn == nil {
		return
	}
	q, ok := makeQuery(lat, lon, marginM)
	if !ok {
		return
	}
	v := visitorPool.Get().(*visitor)
	v.fences, v.fn, v.stopped = s.fences, fn, false
	for i := 0; i < q.n && !v.stopped; i++ {
		s.tree.Search(q.min[i], q.max[i], v.iter)
	}
	v.fences, v.fn, v.seen = nil, nil, v.seen[:0]
	visitorPool.Put(v)
}

// visitor adapts the rtree callback to Near's. Pooled, with its method
// value bound once, so a search allocates no closure.
type visitor struct {
	fences  []Fence
	fn      func(*Fence) bool
	seen    []uint32 // split fences already visited in this call
	stopped bool
	iter    func(min, max [2]float64, data uint32) bool
}

var visitorPool = sync.Pool{New: func() any {
	v := &visitor{}
	v.iter = v.visit
	return v
}}

func (v *visitor) visit(_, _ [2]float64, data uint32) bool {
	if data&splitEntry != 0 {
		data &^= splitEntry
		if slices.Contains(v.seen, data) {
			return true
		}
		v.seen = append(v.seen, data)
	}
	if !v.fn(&v.fences[data]) {
		v.stopped = true
		return false
	}
	return true
}
