package fences

import (
	"cmp"
	"math"
	"slices"
)

// edge is one edge of a ring, with its box, for the sweep.
type edge struct {
	a, b                   vec
	poly, ring, k          int // polygon, ring and edge index (edge k is ring[k]→ring[k+1])
	minX, maxX, minY, maxY float64
}

// appendEdges appends the edges of a closed ring.
func appendEdges(es []edge, ring []vec, poly, ri int) []edge {
	for k := 0; k+1 < len(ring); k++ {
		a, b := ring[k], ring[k+1]
		es = append(es, edge{a: a, b: b, poly: poly, ring: ri, k: k,
			minX: math.Min(a.x, b.x), maxX: math.Max(a.x, b.x), minY: math.Min(a.y, b.y), maxY: math.Max(a.y, b.y)})
	}
	return es
}

// boxPairs calls fn once for every pair of edges whose boxes, grown by tol,
// overlap (touching counts), until fn returns false; it reports whether it
// stopped early.
//
// A sweep in x: edges sorted by their west end, each compared with the
// active edges whose east end still reaches it. The active edges are kept
// in √n bands of y, so an edge meets only the active edges of the bands it
// spans: O(n log n) for fence outlines, smooth or jagged, instead of the
// O(n²) of comparing every pair (a 100,000-vertex polygon took 66 s).
func boxPairs(es []edge, tol float64, fn func(e, f *edge) bool) bool {
	if len(es) < 2 {
		return false
	}
	order := make([]int32, len(es))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range es {
		order[i] = int32(i)
		lo, hi = math.Min(lo, es[i].minY), math.Max(hi, es[i].maxY)
	}
	slices.SortFunc(order, func(i, j int32) int { return cmp.Compare(es[i].minX, es[j].minX) })
	nb := max(1, int(math.Sqrt(float64(len(es)))))
	height := (hi - lo + 2*tol) / float64(nb)
	band := func(y float64) int {
		if !(height > 0) {
			return 0
		}
		return min(nb-1, max(0, int((y-lo+tol)/height)))
	}
	bands := make([][]int32, nb)
	for _, i := range order {
		e := &es[i]
		eLo, eHi := band(e.minY-tol), band(e.maxY+tol)
		for b := eLo; b <= eHi; b++ {
			w := 0
			for _, j := range bands[b] {
				f := &es[j]
				if f.maxX+tol < e.minX {
					continue // ends west of everything still to come: drop it
				}
				bands[b][w] = j
				w++
				// A pair spanning several bands is met in each; it counts in
				// the first band both span.
				if f.minY-tol <= e.maxY && e.minY-tol <= f.maxY && b == max(eLo, band(f.minY-tol)) && !fn(f, e) {
					return true
				}
			}
			bands[b] = append(bands[b][:w], i)
		}
	}
	return false
}
