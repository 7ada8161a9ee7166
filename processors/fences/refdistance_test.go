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

// TestOneRingShortcutMatchesFullPath: the distance of a one-ring polygon,
// which reads its ring straight from the shape (ring0, vertices in the
// shape's allocation), equals bit for bit the full path over polygons and
// rings and the reference, over 10,000 synthetic fences at points on,
// just off (1 nm to 50 m either side of) and far from their edges and on
// their vertices; a polygon with a hole or several polygons takes the full
// path.
func TestOneRingShortcutMatchesFullPath(t *testing.T) {
	syn, err := Synthetic(10_000, 11)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(12, 13))
	offsets := []float64{0, 1e-9, -1e-9, 1e-6, -1e-6, 1e-3, -1e-3, 0.5, -0.5, 5, -5, 50, -50}
	n, inside, edge := 0, 0, 0
	for _, f := range append(syn, Demo()...) {
		g := f.geo
		if g.circle {
			continue
		}
		if one := len(g.polys) == 1 && len(g.polys[0].rings) == 1; one != (g.ring0 != nil) {
			t.Fatalf("%s: %d polygons, %d rings, shortcut %v", f.ID, len(g.polys), len(g.polys[0].rings), g.ring0 != nil)
		}
		ring := g.polys[0].rings[0]
		for k := range 24 {
			var lat, lon float64
			switch {
			case k < 2: // a vertex
				v := ring[rng.IntN(len(ring))]
				lat, lon = g.lat+v.y, g.lon+v.x
			case k < 20: // on or just off an edge, along its normal in metres
				j := rng.IntN(len(ring) - 1)
				a, b := ring[j], ring[j+1]
				u := rng.Float64()
				y := g.lat + a.y + u*(b.y-a.y)
				x := a.x + u*(b.x-a.x)
				kxm := metresPerDegree * math.Cos(y*degToRad)
				ex, ey := (b.x-a.x)*kxm, (b.y-a.y)*metresPerDegree
				l := math.Hypot(ex, ey)
				off := offsets[rng.IntN(len(offsets))]
				lat = y + off*ex/l/metresPerDegree
				lon = g.lon + x - off*ey/l/kxm
			default: // anywhere in or around the box
				b := g.bounds
				lat = b.South + (rng.Float64()*3-1)*(b.North-b.South)
				lon = b.West + (rng.Float64()*3-1)*(b.East-b.West)
			}
			got := f.SignedDistance(lat, lon)
			px, py, kx := wrapDelta(normLon(lon)-g.lon), lat-g.lat, metresPerDegree*math.Cos(lat*degToRad)
			full := math.Inf(-1)
			for i := range g.polys {
				if d := g.polys[i].signedDistance(px, py, kx); d > full {
					full = d
				}
			}
			ref := math.Inf(-1)
			for i := range g.polys {
				if d := g.polys[i].refSignedDistance(px, py, kx); d > ref {
					ref = d
				}
			}
			if math.Float64bits(got) != math.Float64bits(full) || math.Float64bits(got) != math.Float64bits(ref) {
				t.Fatalf("%s at (%v, %v): %v, full path %v, reference %v", f.ID, lat, lon, got, full, ref)
			}
			n++
			if got >= 0 {
				inside++
			}
			if math.Abs(got) < 1e-3 {
				edge++
			}
		}
	}
	// The points must exercise both sides and the edge itself.
	if inside < n/10 || n-inside < n/10 || edge < n/50 {
		t.Fatalf("%d points: %d inside, %d within 1 mm of the edge", n, inside, edge)
	}
	t.Logf("%d distances compared: %d inside, %d within 1 mm of the edge", n, inside, edge)
}
