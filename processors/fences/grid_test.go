package fences

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/paulmach/orb"
)

// bruteNear is Near's contract evaluated over every fence: the ids whose
// box, grown by margin, contains the point (Bounds.ContainsPoint), sorted.
func bruteNear(all map[string]Fence, lat, lon, margin float64) []string {
	var ids []string
	for id, f := range all {
		if f.Bounds().ContainsPoint(lat, lon, margin) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// checkGrid verifies the grid's bookkeeping against its cells: shard
// counts, non-empty cells and rectangles per level, no empty cell, every
// cell found where a lookup looks for it.
func checkGrid(t *testing.T, g *grid) {
	t.Helper()
	var cells, rects [maxLevels]int
	for si := range g.shards {
		sh := &g.shards[si]
		n := 0
		for i := range sh.slots {
			s := &sh.slots[i]
			if s.key == 0 {
				continue
			}
			n++
			l, cx, cy := keyCell(s.key - 1)
			if shardOfCell(l, cx, cy) != si {
				t.Fatalf("cell %d/%d,%d in shard %d, want %d", l, cx, cy, si, shardOfCell(l, cx, cy))
			}
			if s.first.e == nil || (s.rest != nil && len(s.rest) == 0) {
				t.Fatalf("cell %d/%d,%d is empty but held", l, cx, cy)
			}
			if got := sh.find(s.key - 1); got != s {
				t.Fatalf("cell %d/%d,%d not found by a lookup", l, cx, cy)
			}
			cells[l]++
			for _, it := range s.items() {
				if it.geo != it.e.f.geo {
					t.Fatalf("cell %d/%d,%d: an item's shape is not its fence's", l, cx, cy)
				}
				for _, r := range it.e.rects[:it.e.nrects] {
					// Count each rectangle in the cell of its south-west corner.
					if rl := g.levelOf(r); rl == l {
						if x, y := g.cell(l, r.min[0], r.min[1]); x == cx && y == cy && it.box == f32box(r) {
							rects[l]++
						}
					}
				}
			}
		}
		if n != sh.n || (len(sh.slots) > 0 && n*4 > len(sh.slots)*3) {
			t.Fatalf("shard %d holds %d cells, counts %d, %d slots", si, n, sh.n, len(sh.slots))
		}
	}
	if cells != g.cells || rects != g.rects {
		t.Fatalf("grid counts cells %v rects %v, holds %v %v", g.cells, g.rects, cells, rects)
	}
}

// oddFences are the shapes a grid sized for small fences must still find:
// a circle of 900 km (top levels), one reaching the pole (every longitude),
// fences across the antimeridian (two rectangles), a long thin polygon
// (many cells in one row), a 1 m circle, and fences whose box edges lie on
// cell boundaries of level 0 (cells of a 0.01° grid, the size the
// synthetic set picks is of that order).
func oddFences(tb testing.TB) []Fence {
	tb.Helper()
	var out []Fence
	add := func(f Fence, err error) {
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, f)
	}
	add(NewCircleFence("odd-huge", "", 51, 10, 900_000, Settings{}))
	add(NewCircleFence("odd-pole", "", 89.5, 20, 80_000, Settings{}))
	add(NewCircleFence("odd-tiny", "", 50.5, 8.25, 1, Settings{}))
	add(NewCircleFence("odd-am-circle", "", -16.5, 179.99, 5_000, Settings{}))
	add(NewPolygonFence("odd-am-poly", "", orb.Polygon{{{179.9, 10}, {-179.9, 10}, {-179.9, 10.2}, {179.9, 10.2}, {179.9, 10}}}, Settings{}))
	add(NewPolygonFence("odd-long", "", orb.Polygon{{{6, 52}, {14.5, 52}, {14.5, 52.01}, {6, 52.01}, {6, 52}}}, Settings{}))
	add(NewPolygonFence("odd-tall", "", orb.Polygon{{{9, 47.5}, {9.01, 47.5}, {9.01, 54.5}, {9, 54.5}, {9, 47.5}}}, Settings{}))
	for i := range 20 {
		w, s := 6+float64(i)*0.37, 48+float64(i)*0.29
		w, s = math.Round(w*100)/100, math.Round(s*100)/100 // on 0.01° lines
		add(NewPolygonFence(fmt.Sprintf("odd-aligned-%02d", i), "", orb.Polygon{{{w, s}, {w + 0.02, s}, {w + 0.02, s + 0.01}, {w, s + 0.01}, {w, s}}}, Settings{}))
	}
	return out
}

// gridPoints are query points for the fences in all: inside and around
// fences, exactly on their box edges and corners, on level-0 cell
// boundaries of g, uniform over the area, and at the antimeridian and the
// poles; each with a margin from 0 to 2,000 km (a lookup reading the whole
// grid instead of its cells).
func gridPoints(rng *rand.Rand, all map[string]Fence, g *grid, n int) [][3]float64 {
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	margins := []float64{0, 0, 1, 30, 60, 500, 5_000, 50_000, 2_000_000}
	a := SyntheticArea()
	pts := make([][3]float64, 0, n)
	for len(pts) < n {
		m := margins[rng.IntN(len(margins))]
		f := all[ids[rng.IntN(len(ids))]]
		b := f.Bounds()
		var lat, lon float64
		switch rng.IntN(7) {
		case 0, 1: // in and around a fence's box
			lat = b.South + (rng.Float64()*1.4-0.2)*(b.North-b.South)
			lon = b.West + (rng.Float64()*1.4-0.2)*(b.East-b.West)
		case 2: // exactly on a box edge or corner
			lat = []float64{b.South, b.North, (b.South + b.North) / 2}[rng.IntN(3)]
			lon = []float64{b.West, b.East, (b.West + b.East) / 2}[rng.IntN(3)]
		case 3: // a box edge pushed out by exactly the margin's degrees
			lat = b.North + m/marginMetresPerDegree
			lon = b.West
		case 4: // on a level-0 cell boundary near the area
			lon = float64(int32((a.West+rng.Float64()*(a.East-a.West)+180)*g.inv[0][0]))/g.inv[0][0] - 180
			lat = float64(int32((a.South+rng.Float64()*(a.North-a.South)+90)*g.inv[0][1]))/g.inv[0][1] - 90
		case 5:
			lat = a.South + rng.Float64()*(a.North-a.South)
			lon = a.West + rng.Float64()*(a.East-a.West)
		default: // the world's edges
			lat = []float64{-90, 90, 89.9, -16.5, 10.1, 0}[rng.IntN(6)]
			lon = []float64{-180, 180, 179.995, -179.95, 20, 0}[rng.IntN(6)]
		}
		pts = append(pts, [3]float64{math.Max(-90, math.Min(90, lat)), normLon(lon), m})
	}
	return pts
}

// TestGridMatchesBruteForce: after a bulk build and after every batch of
// random upserts, moves, deletes and re-upserts (including fences far
// bigger and smaller than the grid was sized for), Near visits exactly the
// fences whose grown box holds the point (each once), for points on fence
// box edges, cell boundaries, the antimeridian and the poles; the grid's
// counts match its cells; earlier snapshots keep their answers.
func TestGridMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	base, err := Synthetic(1500, 9)
	if err != nil {
		t.Fatal(err)
	}
	odd := oddFences(t)
	model := map[string]Fence{}
	for _, f := range base {
		model[f.ID] = f
	}
	c := New()
	if err := c.Apply(1, base, nil); err != nil {
		t.Fatal(err)
	}
	check := func(round int, s *Snapshot, pts [][3]float64) [][]string {
		t.Helper()
		checkGrid(t, &s.idx)
		var out [][]string
		hits := 0
		for _, p := range pts {
			counts := map[string]int{}
			s.Near(p[0], p[1], p[2], func(f *Fence) bool { counts[f.ID]++; return true })
			var got []string
			for id, n := range counts {
				if n != 1 {
					t.Fatalf("round %d: Near(%v, %v, %v) visited %s %d times", round, p[0], p[1], p[2], id, n)
				}
				got = append(got, id)
			}
			slices.Sort(got)
			if want := bruteNear(model, p[0], p[1], p[2]); !slices.Equal(got, want) {
				t.Fatalf("round %d: Near(%v, %v, %v) = %v, brute force %v", round, p[0], p[1], p[2], got, want)
			}
			hits += len(got)
			out = append(out, got)
		}
		if hits == 0 {
			t.Fatalf("round %d: no point found a fence", round)
		}
		return out
	}
	type kept struct {
		s    *Snapshot
		pts  [][3]float64
		want [][]string
	}
	var olds []kept
	pts := gridPoints(rng, model, &c.Snapshot().idx, 1000)
	olds = append(olds, kept{c.Snapshot(), pts, check(0, c.Snapshot(), pts)})
	next := len(base)
	for round := 1; round <= 40; round++ {
		var ups []Fence
		var dels []string
		held := make([]string, 0, len(model))
		for id := range model {
			held = append(held, id)
		}
		slices.Sort(held)
		for range 1 + rng.IntN(60) {
			switch k := rng.IntN(12); {
			case k < 3: // move a synthetic fence
				i := rng.IntN(next)
				f, err := SyntheticFence(i, uint64(1000+round))
				if err != nil {
					t.Fatal(err)
				}
				ups = append(ups, f)
			case k < 5: // a new one
				f, err := SyntheticFence(next, 9)
				if err != nil {
					t.Fatal(err)
				}
				next++
				ups = append(ups, f)
			case k < 7: // an odd one, new or again
				ups = append(ups, odd[rng.IntN(len(odd))])
			case k < 10:
				dels = append(dels, held[rng.IntN(len(held))])
			case k < 11: // delete and re-upsert in one batch: present after
				id := held[rng.IntN(len(held))]
				dels = append(dels, id)
				ups = append(ups, model[id])
			default:
				dels = append(dels, fmt.Sprintf("never-%d", rng.IntN(100)))
			}
		}
		for _, id := range dels {
			delete(model, id)
		}
		for _, f := range ups {
			model[f.ID] = f
		}
		if err := c.Apply(uint64(1+round), ups, dels); err != nil {
			t.Fatal(err)
		}
		s := c.Snapshot()
		if s.Len() != len(model) {
			t.Fatalf("round %d: %d fences, model %d", round, s.Len(), len(model))
		}
		pts := gridPoints(rng, model, &s.idx, 250)
		want := check(round, s, pts)
		if round%8 == 0 {
			olds = append(olds, kept{s, pts, want})
		}
	}
	for i, k := range olds {
		for j, p := range k.pts {
			if got := nearIDs(k.s, p[0], p[1], p[2]); !slices.Equal(got, k.want[j]) {
				t.Fatalf("kept snapshot %d: Near(%v) = %v, was %v", i, p, got, k.want[j])
			}
		}
	}
}

// TestGridSizedForOtherFences: a grid sized by a first batch of 1 m
// circles, then filled incrementally with country-sized and ordinary
// fences (and the reverse), still answers as brute force does.
func TestGridSizedForOtherFences(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	tiny := make([]Fence, 0, 50)
	for i := range 50 {
		f, err := NewCircleFence(fmt.Sprintf("tiny-%d", i), "", 50+rng.Float64(), 8+rng.Float64(), 1, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		tiny = append(tiny, f)
	}
	syn, err := Synthetic(400, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][2][]Fence{{tiny, append(oddFences(t), syn...)}, {oddFences(t), append(tiny, syn...)}} {
		c := New()
		model := map[string]Fence{}
		if err := c.Apply(1, order[0], nil); err != nil {
			t.Fatal(err)
		}
		for _, f := range order[0] {
			model[f.ID] = f
		}
		// One by one: every batch is far below a quarter of the catalogue
		// once it has grown, so the grid keeps its first cell size.
		for i, f := range order[1] {
			if err := c.Apply(uint64(2+i), []Fence{f}, nil); err != nil {
				t.Fatal(err)
			}
			model[f.ID] = f
		}
		s := c.Snapshot()
		checkGrid(t, &s.idx)
		for _, p := range gridPoints(rng, model, &s.idx, 2000) {
			if got, want := nearIDs(s, p[0], p[1], p[2]), bruteNear(model, p[0], p[1], p[2]); !slices.Equal(got, want) {
				t.Fatalf("Near(%v, %v, %v) = %v, brute force %v", p[0], p[1], p[2], got, want)
			}
		}
	}
}

// TestGridShardTable exercises the open-addressed table on its own: random
// sets and removals against a map, so backward-shift deletion never loses
// a cell that probed past the removed one.
func TestGridShardTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	var sh gridShard
	model := map[uint64]int{}
	item := []gridItem{{e: &entry{}}}
	for i := range 20000 {
		k := uint64(rng.IntN(300)) * 0x9e3779b9 // collide in few slots
		if rng.IntN(3) == 0 {
			sh.set(k, nil)
			delete(model, k)
		} else {
			sh.set(k, item)
			model[k] = i
		}
		if sh.n != len(model) {
			t.Fatalf("step %d: table holds %d, model %d", i, sh.n, len(model))
		}
		if i%97 == 0 {
			for k := range model {
				if sh.find(k) == nil {
					t.Fatalf("step %d: key %d lost", i, k)
				}
			}
		}
	}
}
