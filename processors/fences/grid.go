package fences

import (
	"cmp"
	"math"
	"slices"
	"sync"
)

// The spatial index: a stack of uniform lat/lon grids (levels), each
// levelFactor times coarser than the one below, held as a hash of its
// non-empty cells. Level 0's cells are sized from the fences themselves
// (cellPerExtent × the median fence extent, chosen at each bulk build), so
// a typical fence lies in 1–4 cells of level 0 and a lookup reads one cell:
// a few dozen contiguous bytes holding each candidate's box, instead of a
// walk down a tree whose nodes are scattered over the heap. A fence too big
// for level 0 goes to the lowest level where it spans at most 3 cells per
// axis; the top level is one cell holding the world, so any fence fits.
// Levels holding nothing are skipped by lookups.
//
// Copy-on-write: cells live in gridShards hash tables, a block of
// shardBlock × shardBlock neighbouring cells in the same one. An update
// copies the tables it touches (16–32 KB each at 100,000 fences), replaces
// the cells it changes with new slots and item slices, and shares everything else with the
// snapshots already published, which it never writes to.

const (
	gridShards  = 1024
	shardBlock  = 4 // cells per axis of the blocks that share a shard
	maxLevels   = 12
	levelFactor = 4
	// cellPerExtent sizes level 0's cells against the median fence extent:
	// bigger cells hold more candidates per lookup, smaller ones repeat each
	// fence in more cells (memory, update cost).
	cellPerExtent = 2
	// Level 0 cells stay between these sizes whatever the fences.
	minCellM = 50.0
	maxCellM = 200_000.0
)

// gridItem is one fence rectangle in one cell. The box is the rectangle
// rounded outward to float32 (a conservative first test that keeps two
// items per cache line). geo is e.f.geo: a lookup that passes the first
// test reads the exact box from the shape and the entry's rectangle count
// at once, two independent loads, so the shape the caller's distance
// needs next is already on its way while the entry arrives.
type gridItem struct {
	box [4]float32 // west, south, east, north
	geo *shape
	e   *entry
}

// cellSlot is one non-empty cell of a shard's open-addressed table, one
// cache line: the cell's first item is in the slot itself, so a lookup in a
// cell of one fence reads one line, not two.
type cellSlot struct {
	key   uint64 // cellKey + 1; 0 marks an empty slot
	first gridItem
	rest  []gridItem // the items after first
}

// items returns a new slice of the cell's items (for writers).
func (s *cellSlot) items() []gridItem {
	return append([]gridItem{s.first}, s.rest...)
}

// gridShard is a linear-probing table of cells; len(slots) is a power of
// two (or 0), at most 3/4 full. Published shards are never written to.
type gridShard struct {
	slots []cellSlot
	n     int
}

// grid is the index. Held by value in a Snapshot: copying it copies the
// shard headers (32 KB), not the cells.
type grid struct {
	levels int
	inv    [maxLevels][2]float64 // cells per degree of lon, lat
	ncell  [maxLevels][2]int32   // cells per axis
	rects  [maxLevels]int        // rectangles held per level
	cells  [maxLevels]int        // non-empty cells per level
	shards [gridShards]gridShard
}

// newGrid sizes a grid for the fences' rectangles.
func newGrid(es []*entry) grid {
	var g grid
	ext := make([]float64, 0, len(es))
	lats := make([]float64, 0, len(es))
	for _, e := range es {
		for _, r := range e.rects[:e.nrects] {
			mid := (r.min[1] + r.max[1]) / 2
			w := (r.max[0] - r.min[0]) * metresPerDegree * math.Cos(mid*degToRad)
			h := (r.max[1] - r.min[1]) * metresPerDegree
			ext = append(ext, math.Max(w, h))
			lats = append(lats, math.Abs(mid))
		}
	}
	cellM, lat := 1000.0, 45.0
	if len(ext) > 0 {
		slices.Sort(ext)
		slices.Sort(lats)
		cellM = cellPerExtent * ext[len(ext)/2]
		lat = lats[len(lats)/2]
	}
	cellM = math.Min(math.Max(cellM, minCellM), maxCellM)
	sy := cellM / metresPerDegree
	sx := cellM / (metresPerDegree * math.Max(math.Cos(lat*degToRad), 0.1))
	for l := 0; l < maxLevels; l++ {
		top := l == maxLevels-1 || (sx >= 360 && sy >= 180)
		if top {
			sx, sy = 360, 180
		}
		g.inv[l] = [2]float64{1 / sx, 1 / sy}
		g.ncell[l] = [2]int32{int32(math.Ceil(360 / sx)), int32(math.Ceil(180 / sy))}
		g.levels = l + 1
		if top {
			break
		}
		sx, sy = math.Min(sx*levelFactor, 360), math.Min(sy*levelFactor, 180)
	}
	return g
}

// cell is the cell of (lon, lat) at level l. Monotonic in each coordinate,
// which the lookup's once-per-fence rule relies on.
func (g *grid) cell(l int, lon, lat float64) (int32, int32) {
	cx := min(max(int32((lon+180)*g.inv[l][0]), 0), g.ncell[l][0]-1)
	cy := min(max(int32((lat+90)*g.inv[l][1]), 0), g.ncell[l][1]-1)
	return cx, cy
}

// levelOf is the lowest level at which r spans at most 3 cells per axis.
func (g *grid) levelOf(r rect) int {
	w, h := r.max[0]-r.min[0], r.max[1]-r.min[1]
	for l := 0; l < g.levels-1; l++ {
		if w*g.inv[l][0] <= 2 && h*g.inv[l][1] <= 2 {
			return l
		}
	}
	return g.levels - 1
}

func cellKey(l int, cx, cy int32) uint64 {
	return uint64(l)<<58 | uint64(cy)<<29 | uint64(cx)
}

func keyCell(k uint64) (l int, cx, cy int32) {
	return int(k >> 58), int32(k & (1<<29 - 1)), int32(k >> 29 & (1<<29 - 1))
}

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func shardOfCell(l int, cx, cy int32) int {
	return int(mix(cellKey(l, cx/shardBlock, cy/shardBlock)) % gridShards)
}

// find returns the slot of the cell with key k (nil if empty).
func (sh *gridShard) find(k uint64) *cellSlot {
	if len(sh.slots) == 0 {
		return nil
	}
	mask := uint64(len(sh.slots) - 1)
	for i := mix(k) & mask; ; i = (i + 1) & mask {
		s := &sh.slots[i]
		if s.key == k+1 {
			return s
		}
		if s.key == 0 {
			return nil
		}
	}
}

// set replaces the items of cell k (nil items remove it) in a shard the
// caller owns, and reports how the number of non-empty cells changed.
func (sh *gridShard) set(k uint64, items []gridItem) int {
	if len(items) > 0 && (sh.n+1)*4 > len(sh.slots)*3 {
		sh.grow()
	}
	if len(sh.slots) == 0 {
		return 0
	}
	mask := uint64(len(sh.slots) - 1)
	i := mix(k) & mask
	for ; sh.slots[i].key != 0; i = (i + 1) & mask {
		if sh.slots[i].key == k+1 {
			if len(items) > 0 {
				sh.slots[i] = newSlot(k, items)
				return 0
			}
			sh.remove(i)
			return -1
		}
	}
	if len(items) == 0 {
		return 0
	}
	sh.slots[i] = newSlot(k, items)
	sh.n++
	return 1
}

func newSlot(k uint64, items []gridItem) cellSlot {
	s := cellSlot{key: k + 1, first: items[0]}
	if len(items) > 1 {
		s.rest = items[1:]
	}
	return s
}

// remove empties slot i, shifting later members of its probe run back so
// that no lookup stops early (no tombstones).
func (sh *gridShard) remove(i uint64) {
	mask := uint64(len(sh.slots) - 1)
	sh.n--
	for j := (i + 1) & mask; sh.slots[j].key != 0; j = (j + 1) & mask {
		home := mix(sh.slots[j].key-1) & mask
		// Slot j may move to i if its home is not in (i, j] cyclically.
		if (j-home)&mask >= (j-i)&mask {
			sh.slots[i] = sh.slots[j]
			i = j
		}
	}
	sh.slots[i] = cellSlot{}
}

func (sh *gridShard) grow() {
	old := sh.slots
	sh.slots = make([]cellSlot, max(8, 2*len(old)))
	sh.n = 0
	mask := uint64(len(sh.slots) - 1)
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := mix(s.key-1) & mask
		for sh.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		sh.slots[i] = s
		sh.n++
	}
}

// f32box rounds r outward to float32.
func f32box(r rect) [4]float32 {
	down := func(x float64) float32 {
		f := float32(x)
		if float64(f) > x {
			f = math.Nextafter32(f, float32(math.Inf(-1)))
		}
		return f
	}
	up := func(x float64) float32 {
		f := float32(x)
		if float64(f) < x {
			f = math.Nextafter32(f, float32(math.Inf(1)))
		}
		return f
	}
	return [4]float32{down(r.min[0]), down(r.min[1]), up(r.max[0]), up(r.max[1])}
}

// gridWriter changes a copy of a published grid: each shard it touches is
// copied once.
type gridWriter struct {
	g      *grid
	copied [gridShards]bool
}

// cellsOf calls fn for every cell of rectangle r at its level, with the
// cell of r's south-west corner (cx0, cy0).
func (g *grid) cellsOf(r rect, fn func(l int, cx, cy, cx0, cy0 int32)) {
	l := g.levelOf(r)
	cx0, cy0 := g.cell(l, r.min[0], r.min[1])
	cx1, cy1 := g.cell(l, r.max[0], r.max[1])
	for cy := cy0; cy <= cy1; cy++ {
		for cx := cx0; cx <= cx1; cx++ {
			fn(l, cx, cy, cx0, cy0)
		}
	}
}

func (w *gridWriter) shard(l int, cx, cy int32) *gridShard {
	i := shardOfCell(l, cx, cy)
	sh := &w.g.shards[i]
	if !w.copied[i] {
		w.copied[i] = true
		sh.slots = slices.Clone(sh.slots)
	}
	return sh
}

func (w *gridWriter) insert(e *entry) {
	for _, r := range e.rects[:e.nrects] {
		box := f32box(r)
		w.g.cellsOf(r, func(l int, cx, cy, cx0, cy0 int32) {
			if cx == cx0 && cy == cy0 {
				w.g.rects[l]++
			}
			sh := w.shard(l, cx, cy)
			k := cellKey(l, cx, cy)
			var items []gridItem
			if s := sh.find(k); s != nil {
				items = s.items()
			}
			items = append(items, gridItem{box: box, geo: e.f.geo, e: e})
			w.g.cells[l] += sh.set(k, items)
		})
	}
}

func (w *gridWriter) remove(e *entry) {
	for _, r := range e.rects[:e.nrects] {
		w.g.cellsOf(r, func(l int, cx, cy, cx0, cy0 int32) {
			if cx == cx0 && cy == cy0 {
				w.g.rects[l]--
			}
			sh := w.shard(l, cx, cy)
			k := cellKey(l, cx, cy)
			var items []gridItem
			if s := sh.find(k); s != nil {
				items = slices.DeleteFunc(s.items(), func(it gridItem) bool { return it.e == e })
			}
			w.g.cells[l] += sh.set(k, items)
		})
	}
}

// buildGrid indexes es from scratch: the items after each cell's first are
// laid out in key order in one backing array, so neighbouring cells of a
// row are neighbours in memory.
func buildGrid(es []*entry) grid {
	g := newGrid(es)
	type placed struct {
		k  uint64
		it gridItem
	}
	var all []placed
	for _, e := range es {
		for _, r := range e.rects[:e.nrects] {
			box := f32box(r)
			g.cellsOf(r, func(l int, cx, cy, cx0, cy0 int32) {
				if cx == cx0 && cy == cy0 {
					g.rects[l]++
				}
				all = append(all, placed{k: cellKey(l, cx, cy), it: gridItem{box: box, geo: e.f.geo, e: e}})
			})
		}
	}
	slices.SortFunc(all, func(a, b placed) int { return cmp.Compare(a.k, b.k) })
	// Size every shard for its cells first, so no table grows while filling.
	var perShard [gridShards]int
	nrest := 0
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].k == all[i].k {
			j++
		}
		l, cx, cy := keyCell(all[i].k)
		perShard[shardOfCell(l, cx, cy)]++
		nrest += j - i - 1
		i = j
	}
	rest := make([]gridItem, 0, nrest)
	var one [1]gridItem
	for i, n := range perShard {
		if n > 0 {
			size := 8
			for size*3 < n*4 {
				size *= 2
			}
			g.shards[i].slots = make([]cellSlot, size)
		}
	}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].k == all[i].k {
			j++
		}
		l, cx, cy := keyCell(all[i].k)
		// The cell's first item goes in its slot, the others after the
		// previous cell's in rest.
		from := len(rest)
		for _, p := range all[i+1 : j] {
			rest = append(rest, p.it)
		}
		sh := &g.shards[shardOfCell(l, cx, cy)]
		one[0] = all[i].it // set copies it into the slot
		g.cells[l] += sh.set(all[i].k, one[:])
		if j > i+1 {
			sh.find(all[i].k).rest = rest[from:len(rest):len(rest)]
		}
		i = j
	}
	return g
}

// near calls fn once for every fence whose rectangle intersects one of
// q's, until fn returns false.
func (g *grid) near(q *query, fn func(f *Fence) bool) {
	lk := lookup{fn: fn, g: g, dedup: q.n > 1}
	defer lk.release()
	for l := 0; l < g.levels; l++ {
		if g.rects[l] == 0 {
			continue
		}
		lk.l = l
		for qi := 0; qi < q.n; qi++ {
			lk.qmin, lk.qmax = q.min[qi], q.max[qi]
			lk.qcx0, lk.qcy0 = g.cell(l, lk.qmin[0], lk.qmin[1])
			qcx1, qcy1 := g.cell(l, lk.qmax[0], lk.qmax[1])
			if probes := int64(qcx1-lk.qcx0+1) * int64(qcy1-lk.qcy0+1); probes <= gridShards || probes <= int64(g.heldCells()+gridShards) {
				for cy := lk.qcy0; cy <= qcy1; cy++ {
					for cx := lk.qcx0; cx <= qcx1; cx++ {
						s := g.shards[shardOfCell(l, cx, cy)].find(cellKey(l, cx, cy))
						if s != nil && !lk.visit(cx, cy, s) {
							return
						}
					}
				}
				continue
			}
			// The query covers more cells than the grid holds: read those.
			for si := range g.shards {
				for i := range g.shards[si].slots {
					s := &g.shards[si].slots[i]
					if s.key == 0 {
						continue
					}
					sl, cx, cy := keyCell(s.key - 1)
					if sl == l && cx >= lk.qcx0 && cx <= qcx1 && cy >= lk.qcy0 && cy <= qcy1 && !lk.visit(cx, cy, s) {
						return
					}
				}
			}
		}
	}
}

// heldCells is the number of non-empty cells over all levels.
func (g *grid) heldCells() int {
	n := 0
	for _, c := range g.cells[:g.levels] {
		n += c
	}
	return n
}

// lookup is one near call's state; it lives on the caller's stack.
type lookup struct {
	fn         func(*Fence) bool
	g          *grid
	l          int // the level being read
	qmin, qmax [2]float64
	qcx0, qcy0 int32
	dedup      bool // the query has two rectangles
	// Fences reached so far that two rectangles can reach: the first 8 in
	// seen, the rest in more (pooled, rarely needed).
	nseen int
	seen  [8]*entry
	more  *[]*entry
}

// visit reports the items of cell (cx, cy) that intersect the query
// rectangle.
func (lk *lookup) visit(cx, cy int32, s *cellSlot) bool {
	if !lk.item(cx, cy, &s.first) {
		return false
	}
	for i := range s.rest {
		if !lk.item(cx, cy, &s.rest[i]) {
			return false
		}
	}
	return true
}

// item reports it if its rectangle intersects the query rectangle, each
// fence in the one cell holding the south-west corner of its overlap with
// the query: cell is monotonic, so that cell is (max(cx0, qcx0),
// max(cy0, qcy0)) for the rectangle's own corner cell (cx0, cy0). A fence
// split at the antimeridian (two rectangles) is de-duplicated by identity
// instead. It returns false when fn asks to stop.
func (lk *lookup) item(cx, cy int32, it *gridItem) bool {
	qmin, qmax := &lk.qmin, &lk.qmax
	if float64(it.box[0]) > qmax[0] || float64(it.box[2]) < qmin[0] ||
		float64(it.box[1]) > qmax[1] || float64(it.box[3]) < qmin[1] {
		return true
	}
	e, b := it.e, &it.geo.bounds
	split := e.nrects > 1
	if !split {
		if b.West > qmax[0] || b.East < qmin[0] || b.South > qmax[1] || b.North < qmin[1] {
			return true
		}
		cx0, cy0 := lk.g.cell(lk.l, b.West, b.South)
		if max(cx0, lk.qcx0) != cx || max(cy0, lk.qcy0) != cy {
			return true
		}
	} else if !intersects(*qmin, *qmax, e.rects[0].min, e.rects[0].max) && !intersects(*qmin, *qmax, e.rects[1].min, e.rects[1].max) {
		return true
	}
	if (lk.dedup || split) && !lk.first(e) {
		return true
	}
	return lk.fn(&e.f)
}

// first reports whether e is reached for the first time.
func (lk *lookup) first(e *entry) bool {
	if slices.Contains(lk.seen[:min(lk.nseen, len(lk.seen))], e) || (lk.more != nil && slices.Contains(*lk.more, e)) {
		return false
	}
	if lk.nseen < len(lk.seen) {
		lk.seen[lk.nseen] = e
	} else {
		if lk.more == nil {
			lk.more = seenPool.Get().(*[]*entry)
		}
		*lk.more = append(*lk.more, e)
	}
	lk.nseen++
	return true
}

func (lk *lookup) release() {
	if lk.more != nil {
		clear(*lk.more)
		*lk.more = (*lk.more)[:0]
		seenPool.Put(lk.more)
	}
}

// seenPool holds the rare lookups that reach more than 8 fences through
// two rectangles (split at the antimeridian, or a query that wraps).
var seenPool = sync.Pool{New: func() any { return new([]*entry) }}

// memBytes estimates the bytes the grid holds that no other snapshot
// shares (all of it for a freshly built one): tables and items.
func (g *grid) memBytes() int {
	const slotBytes, itemBytes = 64, 32
	n := 0
	for i := range g.shards {
		n += len(g.shards[i].slots) * slotBytes
		for _, s := range g.shards[i].slots {
			n += cap(s.rest) * itemBytes
		}
	}
	return n
}
