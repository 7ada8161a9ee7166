package fences

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// bruteRingSimple is the O(n²) definition checkRingSimple must agree with.
func bruteRingSimple(r []vec) bool {
	n := len(r) - 1
	for i := 0; i < n; i++ {
		for j := i + 2; j < n; j++ {
			if i == 0 && j == n-1 {
				continue
			}
			if segmentsTouch(r[i], r[i+1], r[j], r[j+1]) {
				return false
			}
		}
	}
	return true
}

func bruteRingsCross(rings [][]vec) bool {
	for ri := range rings {
		for rj := 0; rj < ri; rj++ {
			p, q := rings[ri], rings[rj]
			for i := 0; i+1 < len(p); i++ {
				for j := 0; j+1 < len(q); j++ {
					if segmentsCross(p[i], p[i+1], q[j], q[j+1]) {
						return true
					}
				}
			}
		}
	}
	return false
}

// starRing is a closed ring of n vertices around (0, 0) at radii in
// [r0, r0+jitter], by angle: simple whatever the radii.
func starRing(rng *rand.Rand, n int, r0, jitter float64) []vec {
	ring := make([]vec, 0, n+1)
	for k := range n {
		a := 2 * math.Pi * float64(k) / float64(n)
		r := r0 + jitter*rng.Float64()
		ring = append(ring, vec{r * math.Cos(a), r * math.Sin(a)})
	}
	return append(ring, ring[0])
}

// TestSweepMatchesBruteForce: on random rings, simple and not, the sweep
// finds an intersection exactly when comparing every pair does.
func TestSweepMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var simple, broken, crossing int
	for trial := range 3000 {
		n := 3 + rng.IntN(30)
		var r []vec
		switch trial % 3 {
		case 0: // random points: mostly self-intersecting
			for range n {
				r = append(r, vec{float64(rng.IntN(8)), float64(rng.IntN(8))}) // a grid: collinear and touching cases
			}
			r = append(r, r[0])
		case 1: // star: simple
			r = starRing(rng, n, 1, 0.5)
		default: // star with one vertex moved anywhere
			r = starRing(rng, n, 1, 0.5)
			k := rng.IntN(n)
			r[k] = vec{rng.Float64()*4 - 2, rng.Float64()*4 - 2}
			if k == 0 {
				r[n] = r[0]
			}
		}
		want := bruteRingSimple(r)
		got := checkRingSimple(r)
		// The fold-back check comes first and may reject a ring the pair
		// test accepts; never the other way round.
		if want && got != nil && !strings.Contains(got.Error(), "fold back") {
			t.Fatalf("ring %v: sweep says %v, every pair says simple", r, got)
		}
		if !want && got == nil {
			t.Fatalf("ring %v: sweep says simple, every pair says not", r)
		}
		if want {
			simple++
		} else {
			broken++
		}
		// Two rings, the second a random quadrilateral.
		q := []vec{}
		for range 4 {
			q = append(q, vec{rng.Float64()*4 - 2, rng.Float64()*4 - 2})
		}
		q = append(q, q[0])
		rings := [][]vec{r, q}
		_, _, gotCross := ringsCross(rings)
		if wantCross := bruteRingsCross(rings); gotCross != wantCross {
			t.Fatalf("rings %v: sweep says cross=%v, every pair %v", rings, gotCross, wantCross)
		}
		if gotCross {
			crossing++
		}
	}
	if simple < 500 || broken < 500 || crossing < 300 {
		t.Fatalf("weak sample: %d simple, %d not, %d crossing pairs", simple, broken, crossing)
	}
}

// wavyRing is a closed ring of n vertices around (0, 0): a radius r0 with
// slow waves and bays (like a detailed district or coast outline) and noise
// of a third of the vertex spacing.
func wavyRing(rng *rand.Rand, n int, r0 float64) []vec {
	ring := make([]vec, 0, n+1)
	step := 2 * math.Pi * r0 / float64(n)
	for k := range n {
		a := 2 * math.Pi * float64(k) / float64(n)
		r := r0*(1+0.15*math.Sin(5*a)+0.05*math.Sin(37*a)+0.01*math.Sin(301*a)) + step*(rng.Float64()-0.5)/3
		ring = append(ring, vec{r * math.Cos(a), r * math.Sin(a)})
	}
	return append(ring, ring[0])
}

// bigRingFeature is a FeatureCollection of one n-vertex polygon about 2 km
// across in Berlin, with a hole.
func bigRingFeature(n int) []byte {
	rng := rand.New(rand.NewPCG(9, uint64(n)))
	ring := wavyRing(rng, n, 0.01)
	hole := starRing(rng, 64, 0.002, 0.001)
	var b strings.Builder
	b.WriteString(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"big"},"geometry":{"type":"Polygon","coordinates":[`)
	for ri, r := range [][]vec{ring, hole} {
		if ri > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for k, v := range r {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "[%.7f,%.7f]", 13.4+v.x*1.6, 52.5+v.y)
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}}]}`)
	return []byte(b.String())
}

func TestBigRingValidates(t *testing.T) {
	fs, err := ParseFences(bigRingFeature(100_000))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || !fs[0].Contains(52.5+0.009, 13.4) || fs[0].Contains(52.5, 13.4) {
		t.Fatal("the big fence or its hole is wrong")
	}
}

// BenchmarkValidateBigRing parses and validates one polygon of n vertices
// (a loaded 100,000-vertex polygon took 66 s with the pairwise check).
func BenchmarkValidateBigRing(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		data := bigRingFeature(n)
		b.Run(fmt.Sprintf("vertices=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := ParseFences(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
