package fences

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSignedDistanceMatchesReference: the branch-free polygon distance
// gives bit for bit what the compare-and-assign form it replaced gives, for
// synthetic polygons and the demo's (holes, multipolygons), at points in,
// around, on the vertices and far from them.
func TestSignedDistanceMatchesReference(t *testing.T) {
	syn, err := Synthetic(2000, 4)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	n := 0
	for _, f := range append(Demo(), syn...) {
		g := f.geo
		if g.circle {
			continue
		}
		b := g.bounds
		for k := range 40 {
			lat := b.South + (rng.Float64()*3-1)*(b.North-b.South)
			lon := b.West + (rng.Float64()*3-1)*(b.East-b.West)
			if k < 4 { // exactly on a vertex
				v := g.polys[0].rings[0][rng.IntN(len(g.polys[0].rings[0]))]
				lat, lon = g.lat+v.y, g.lon+v.x
			}
			px, py, kx := wrapDelta(lon-g.lon), lat-g.lat, metresPerDegree*math.Cos(lat*degToRad)
			for i := range g.polys {
				got, want := g.polys[i].signedDistance(px, py, kx), g.polys[i].refSignedDistance(px, py, kx)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("%s polygon %d at (%v, %v): %v, reference %v", f.ID, i, lat, lon, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d distances compared", n)
}

// refSignedDistance is polyGeo.signedDistance as it was before the
// branch-free clamp: the reference it must equal bit for bit.
func (p *polyGeo) refSignedDistance(px, py, kx float64) float64 {
	const ky = metresPerDegree
	inside := false
	minD2, seamD2 := math.Inf(1), math.Inf(1)
	for r, ring := range p.rings {
		var seams []bool
		if p.seams != nil {
			seams = p.seams[r]
		}
		ax, ay := (ring[0].x-px)*kx, (ring[0].y-py)*ky
		for k := 1; k < len(ring); k++ {
			bx, by := (ring[k].x-px)*kx, (ring[k].y-py)*ky
			if (ay > 0) != (by > 0) && ax-ay*(bx-ax)/(by-ay) > 0 {
				inside = !inside
			}
			ex, ey := bx-ax, by-ay
			// Distinct vertices can still be 0 m apart once scaled (an edge
			// of 1e-300°, or any east-west edge at a pole): measure to the
			// vertex rather than divide 0 by 0.
			t := 0.0
			if l2 := ex*ex + ey*ey; l2 > 0 {
				t = -(ax*ex + ay*ey) / l2
			}
			if t < 0 {
				t = 0
			} else if t > 1 {
				t = 1
			}
			dx, dy := ax+t*ex, ay+t*ey
			d2 := dx*dx + dy*dy
			if seams != nil && seams[k-1] {
				seamD2 = math.Min(seamD2, d2)
			} else if d2 < minD2 {
				minD2 = d2
			}
			ax, ay = bx, by
		}
	}
	d := math.Sqrt(minD2)
	switch {
	case d <= onEdgeM:
		return 0
	case inside || seamD2 <= onEdgeM*onEdgeM:
		return d
	default:
		return -d
	}
}
