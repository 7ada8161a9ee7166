package fences

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/paulmach/orb"
)

const (
	// metresPerDegree is the equirectangular scale: metres per degree of
	// latitude, and of longitude at the equator.
	metresPerDegree = 111_320.0
	// earthRadiusM is the mean Earth radius used by the haversine distance.
	earthRadiusM = 6_371_008.8
	// marginMetresPerDegree converts margins to degrees for the index. It is
	// smaller than both metresPerDegree and a great-circle degree (111,195 m)
	// so that a margin in degrees always covers the same margin in metres.
	marginMetresPerDegree = 111_000.0
	// onEdgeM: a point closer than this to the boundary is on it (distance 0,
	// inside). It only absorbs floating-point rounding.
	onEdgeM = 1e-6
	// maxRadiusM bounds circle radii; beyond it a "fence" is a mistake.
	maxRadiusM = 1_000_000.0
	degToRad   = math.Pi / 180
)

// vec is a vertex in degrees relative to a fence's origin: x is the
// unwrapped longitude difference, y the latitude difference.
type vec struct{ x, y float64 }

// polyGeo is one polygon: ring 0 is the outer ring, the others holes. Each
// ring is closed (last == first) with no consecutive duplicates, so no
// edge has zero length.
type polyGeo struct {
	rings [][]vec
	// seams[r][k] marks edge k of ring r as covered by edges of other
	// polygons of the MultiPolygon (nil when none is): it is interior to
	// the union, as where a fence is split at the antimeridian, so it is
	// not boundary for distances. nil for most fences.
	seams [][]bool
}

// shape is the precomputed form of a fence's geometry. The fields a lookup
// and a one-ring polygon's distance read come first, together (72 bytes):
// bounds (the index's exact test), the origin and the ring.
type shape struct {
	bounds Bounds
	// lat, lon: the circle's centre, or the polygon origin (centre of its
	// box; lon in [-180, 180]).
	lat, lon float64
	// ring0 is polys[0].rings[0] for a polygon of one ring without seams
	// (most fences), so its distance reads no polygon or ring headers;
	// nil otherwise.
	ring0   []vec
	circle  bool
	cosLat  float64 // cos(lat), for the haversine
	radiusM float64
	polys   []polyGeo
}

// shapeOne is a one-ring polygon's shape with its polygon and ring headers.
type shapeOne struct {
	shape
	poly [1]polyGeo
	ring [1][]vec
}

// newShapeOne allocates a one-ring polygon's shape and room for its n
// vertices in one object, the vertices right after the headers: a distance
// on a cold fence then reads the shape and the first vertices from
// neighbouring cache lines, which the hardware fetches together, instead of
// from two allocations anywhere on the heap. The array sizes bound the
// unused room to a quarter; rings beyond 128 vertices get their own.
func newShapeOne(n int) (*shapeOne, []vec) {
	switch {
	case n <= 8:
		s := new(struct {
			shapeOne
			v [8]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 12:
		s := new(struct {
			shapeOne
			v [12]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 16:
		s := new(struct {
			shapeOne
			v [16]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 20:
		s := new(struct {
			shapeOne
			v [20]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 24:
		s := new(struct {
			shapeOne
			v [24]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 32:
		s := new(struct {
			shapeOne
			v [32]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 40:
		s := new(struct {
			shapeOne
			v [40]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 48:
		s := new(struct {
			shapeOne
			v [48]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 56:
		s := new(struct {
			shapeOne
			v [56]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 64:
		s := new(struct {
			shapeOne
			v [64]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 80:
		s := new(struct {
			shapeOne
			v [80]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 96:
		s := new(struct {
			shapeOne
			v [96]vec
		})
		return &s.shapeOne, s.v[:0:n]
	case n <= 128:
		s := new(struct {
			shapeOne
			v [128]vec
		})
		return &s.shapeOne, s.v[:0:n]
	}
	return &shapeOne{}, make([]vec, 0, n)
}

// validPosition reports whether lat/lon are finite and in range.
func validPosition(lat, lon float64) bool {
	return lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180 // false for NaN
}

// wrapDelta maps a longitude difference in [-360, 360] to [-180, 180).
func wrapDelta(d float64) float64 {
	if d >= 180 {
		return d - 360
	}
	if d < -180 {
		return d + 360
	}
	return d
}

// normLon maps any finite longitude to [-180, 180]; values already in range
// are returned unchanged (so both 180 and -180 survive).
func normLon(lon float64) float64 {
	if lon >= -180 && lon <= 180 {
		return lon
	}
	lon = math.Mod(lon+180, 360)
	if lon < 0 {
		lon += 360
	}
	return lon - 180
}

// compile validates a geometry and precomputes its shape. radiusM must be
// positive for a circle (orb.Point) and zero for polygons.
func compile(g orb.Geometry, radiusM float64) (*shape, error) {
	switch g := g.(type) {
	case orb.Point:
		return compileCircle(g, radiusM)
	case orb.Polygon:
		if radiusM != 0 {
			return nil, errorf(ErrInvalidRadius, "radius_m %v on a Polygon (radius_m is for Point circles only)", radiusM)
		}
		return compilePolygons([]orb.Polygon{g}, "")
	case orb.MultiPolygon:
		if radiusM != 0 {
			return nil, errorf(ErrInvalidRadius, "radius_m %v on a MultiPolygon (radius_m is for Point circles only)", radiusM)
		}
		if len(g) == 0 {
			return nil, errorf(ErrTooFewPoints, "MultiPolygon has no polygon")
		}
		return compilePolygons(g, "polygon ")
	case nil:
		return nil, errorf(ErrUnsupportedGeometry, "missing geometry")
	default:
		return nil, errorf(ErrUnsupportedGeometry, "geometry type %s (want Polygon, MultiPolygon, or Point with radius_m)", g.GeoJSONType())
	}
}

func compileCircle(p orb.Point, radiusM float64) (*shape, error) {
	lat, lon := p.Lat(), p.Lon()
	if !validPosition(lat, lon) {
		return nil, errorf(ErrInvalidCoordinates, "centre [%v, %v]", lon, lat)
	}
	if !(radiusM > 0) || radiusM > maxRadiusM { // !(>) also catches NaN
		return nil, errorf(ErrInvalidRadius, "radius_m %v (a Point needs 0 < radius_m <= %v)", radiusM, maxRadiusM)
	}
	s := &shape{circle: true, lat: lat, lon: lon, cosLat: math.Cos(lat * degToRad), radiusM: radiusM}
	// Exact spherical extent, padded by ~1 cm against rounding.
	const pad = 1e-7
	dLat := radiusM / earthRadiusM / degToRad
	s.bounds.South = math.Max(lat-dLat-pad, -90)
	s.bounds.North = math.Min(lat+dLat+pad, 90)
	sinAng := math.Sin(radiusM / earthRadiusM)
	if s.bounds.North >= 90 || s.bounds.South <= -90 || sinAng >= s.cosLat {
		// The circle reaches a pole: it spans every longitude.
		s.bounds.West, s.bounds.East = -180, 180
		return s, nil
	}
	dLon := math.Asin(sinAng/s.cosLat)/degToRad + pad
	s.bounds.West, s.bounds.East = lon-dLon, lon+dLon
	if s.bounds.West < -180 {
		s.bounds.West += 360
	}
	if s.bounds.East > 180 {
		s.bounds.East -= 360
	}
	return s, nil
}

// compilePolygons validates polygons and projects them around one origin.
// prefix names polygons in errors ("polygon " for MultiPolygons).
func compilePolygons(polys []orb.Polygon, prefix string) (*shape, error) {
	where := func(pi, ri int) string {
		if prefix == "" {
			return fmt.Sprintf("ring %d", ri)
		}
		return fmt.Sprintf("%s%d ring %d", prefix, pi, ri)
	}
	// Pass 1: raw checks, and the reference longitude for unwrapping.
	var refLon float64
	haveRef := false
	for pi, p := range polys {
		if len(p) == 0 {
			return nil, errorf(ErrTooFewPoints, "%s%d has no ring", prefix, pi)
		}
		for ri, r := range p {
			if len(r) < 4 {
				return nil, errorf(ErrTooFewPoints, "%s has %d positions, need at least 4", where(pi, ri), len(r))
			}
			for k, pt := range r {
				if !validPosition(pt.Lat(), pt.Lon()) {
					return nil, errorf(ErrInvalidCoordinates, "%s position %d [%v, %v]", where(pi, ri), k, pt.Lon(), pt.Lat())
				}
			}
			if r[0] != r[len(r)-1] {
				return nil, errorf(ErrUnclosedRing, "%s first position %v != last %v", where(pi, ri), [2]float64(r[0]), [2]float64(r[len(r)-1]))
			}
			if !haveRef {
				refLon, haveRef = r[0].Lon(), true
			}
		}
	}

	// Pass 2: unwrap longitudes around the reference so an antimeridian
	// crossing becomes a continuous range, and measure the box.
	minX, minY := math.Inf(1), math.Inf(1)
	maxX, maxY := math.Inf(-1), math.Inf(-1)
	// A polygon of one ring (most fences) is one allocation with its shape,
	// so a distance follows one pointer less twice over when it is cold.
	var one *shapeOne
	var oneRing []vec
	var out []polyGeo
	if len(polys) == 1 && len(polys[0]) == 1 {
		one, oneRing = newShapeOne(len(polys[0][0]))
		out = one.poly[:]
		out[0].rings = one.ring[:]
	} else {
		out = make([]polyGeo, len(polys))
	}
	for pi, p := range polys {
		if one == nil {
			out[pi].rings = make([][]vec, len(p))
		}
		for ri, r := range p {
			ring := oneRing
			if one == nil {
				ring = make([]vec, 0, len(r))
			}
			for _, pt := range r {
				v := vec{x: wrapDelta(pt.Lon() - refLon), y: pt.Lat()}
				if n := len(ring); n > 0 && ring[n-1] == v {
					continue // zero-length edge: harmless, drop it
				}
				ring = append(ring, v)
				minX, maxX = math.Min(minX, v.x), math.Max(maxX, v.x)
				minY, maxY = math.Min(minY, v.y), math.Max(maxY, v.y)
			}
			if len(ring) < 4 {
				return nil, errorf(ErrTooFewPoints, "%s has fewer than 3 distinct vertices", where(pi, ri))
			}
			out[pi].rings[ri] = ring
		}
	}
	if maxX-minX >= 180 {
		return nil, errorf(ErrTooLarge, "spans %.1f° of longitude (limit: under 180°)", maxX-minX)
	}

	// Re-centre on the box so vertex offsets are small numbers.
	cx, cy := (minX+maxX)/2, (minY+maxY)/2
	for pi := range out {
		for _, ring := range out[pi].rings {
			for k := range ring {
				ring[k].x -= cx
				ring[k].y -= cy
			}
		}
	}
	if len(out) > 1 {
		markSeams(out)
	}
	s := &shape{}
	if one != nil {
		s = &one.shape
	}
	*s = shape{lat: cy, lon: normLon(refLon + cx), polys: out}
	if one != nil {
		s.ring0 = out[0].rings[0]
	}
	s.bounds = Bounds{South: minY, North: maxY, West: normLon(refLon + minX), East: normLon(refLon + maxX)}
	if s.bounds.West == 180 && s.bounds.East != 180 {
		s.bounds.West = -180 // keep West <= East unless it really crosses
	}
	if s.bounds.East == -180 && s.bounds.West != -180 {
		s.bounds.East = 180
	}

	// Pass 3: topology. Intersection tests are affine-invariant, so degrees
	// (unwrapped) are as good as metres here.
	for pi := range out {
		rings := out[pi].rings
		for ri, ring := range rings {
			if err := checkRingSimple(ring); err != nil {
				return nil, fmt.Errorf("%s: %w", where(pi, ri), err)
			}
		}
		if len(rings) == 1 {
			continue
		}
		if ri, rj, crossed := ringsCross(rings); crossed {
			return nil, errorf(ErrSelfIntersecting, "%s crosses ring %d", where(pi, ri), rj)
		}
		for ri := 1; ri < len(rings); ri++ {
			// No crossings, so one vertex that is not on the boundary
			// decides: a hole lies inside the outer ring and inside no
			// other hole.
			if inRing(rings[ri], rings[0]) < 0 {
				return nil, errorf(ErrInvalidHole, "%s lies outside the outer ring", where(pi, ri))
			}
		}
		if ri, rj, nested := holeInHole(rings); nested {
			return nil, errorf(ErrInvalidHole, "%s lies inside hole %d", where(pi, ri), rj)
		}
	}
	return s, nil
}

// orient is the sign of the cross product (b-a)×(c-a): >0 left turn.
func orient(a, b, c vec) float64 {
	return (b.x-a.x)*(c.y-a.y) - (b.y-a.y)*(c.x-a.x)
}

// onSegment reports whether c, known collinear with ab, lies within ab's box.
func onSegment(a, b, c vec) bool {
	return math.Min(a.x, b.x) <= c.x && c.x <= math.Max(a.x, b.x) &&
		math.Min(a.y, b.y) <= c.y && c.y <= math.Max(a.y, b.y)
}

// segmentsTouch reports whether segments ab and cd share any point.
func segmentsTouch(a, b, c, d vec) bool {
	if math.Max(a.x, b.x) < math.Min(c.x, d.x) || math.Max(c.x, d.x) < math.Min(a.x, b.x) ||
		math.Max(a.y, b.y) < math.Min(c.y, d.y) || math.Max(c.y, d.y) < math.Min(a.y, b.y) {
		return false
	}
	o1, o2 := orient(a, b, c), orient(a, b, d)
	o3, o4 := orient(c, d, a), orient(c, d, b)
	if ((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0)) {
		return true
	}
	return (o1 == 0 && onSegment(a, b, c)) || (o2 == 0 && onSegment(a, b, d)) ||
		(o3 == 0 && onSegment(c, d, a)) || (o4 == 0 && onSegment(c, d, b))
}

// segmentsCross reports a proper crossing (interiors cross at one point).
func segmentsCross(a, b, c, d vec) bool {
	o1, o2 := orient(a, b, c), orient(a, b, d)
	o3, o4 := orient(c, d, a), orient(c, d, b)
	return ((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0))
}

// checkRingSimple rejects a ring whose edges meet anywhere but at the
// shared vertex of neighbouring edges. O(n log n) for fence outlines (see
// boxPairs).
func checkRingSimple(r []vec) error {
	n := len(r) - 1 // edges r[i]→r[i+1]
	for i := 0; i < n; i++ {
		a, b := r[i], r[i+1]
		// Neighbouring edge: it may only share the vertex b, never fold
		// back along ab (a spike).
		c := r[(i+2)%len(r)]
		if i+2 > n {
			c = r[1]
		}
		if orient(a, b, c) == 0 && (c.x-b.x)*(a.x-b.x)+(c.y-b.y)*(a.y-b.y) > 0 {
			return errorf(ErrSelfIntersecting, "edges %d and %d fold back on each other at %s", i, (i+1)%n, fmtVec(b))
		}
	}
	var err error
	boxPairs(appendEdges(nil, r, 0, 0), 0, func(e, f *edge) bool {
		i, j := min(e.k, f.k), max(e.k, f.k)
		if j == i+1 || (i == 0 && j == n-1) {
			return true // neighbours share a vertex; folding is checked above
		}
		if segmentsTouch(e.a, e.b, f.a, f.b) {
			err = errorf(ErrSelfIntersecting, "edges %d and %d intersect", i, j)
			return false
		}
		return true
	})
	return err
}

// ringsCross reports whether edges of two different rings properly cross,
// and which rings (ri > rj).
func ringsCross(rings [][]vec) (ri, rj int, crossed bool) {
	var es []edge
	for r, ring := range rings {
		es = appendEdges(es, ring, 0, r)
	}
	crossed = boxPairs(es, 0, func(e, f *edge) bool {
		if e.ring != f.ring && segmentsCross(e.a, e.b, f.a, f.b) {
			ri, rj = max(e.ring, f.ring), min(e.ring, f.ring)
			return false
		}
		return true
	})
	return ri, rj, crossed
}

// holeInHole finds a hole inside another (rings known not to cross): only
// holes whose boxes overlap can nest, so the holes are swept by box first.
func holeInHole(rings [][]vec) (ri, rj int, nested bool) {
	if len(rings) < 3 {
		return 0, 0, false
	}
	boxes := make([]edge, 0, len(rings)-1) // one box per hole, as an "edge"
	for r := 1; r < len(rings); r++ {
		b := edge{ring: r, minX: math.Inf(1), minY: math.Inf(1), maxX: math.Inf(-1), maxY: math.Inf(-1)}
		for _, v := range rings[r] {
			b.minX, b.maxX = math.Min(b.minX, v.x), math.Max(b.maxX, v.x)
			b.minY, b.maxY = math.Min(b.minY, v.y), math.Max(b.maxY, v.y)
		}
		boxes = append(boxes, b)
	}
	nested = boxPairs(boxes, 0, func(e, f *edge) bool {
		for _, p := range [2][2]int{{e.ring, f.ring}, {f.ring, e.ring}} {
			if inRing(rings[p[0]], rings[p[1]]) > 0 {
				ri, rj = p[0], p[1]
				return false
			}
		}
		return true
	})
	return ri, rj, nested
}

// inRing classifies ring p against ring q: +1 inside, -1 outside, 0 if
// every vertex of p is on q's boundary. The first decisive vertex wins;
// callers have ruled out crossings.
func inRing(p, q []vec) int {
	for _, v := range p[:len(p)-1] {
		inside, onEdge := pointInRing(v, q)
		if onEdge {
			continue
		}
		if inside {
			return 1
		}
		return -1
	}
	return 0
}

// pointInRing is the even-odd test in degree space, with boundary detection.
func pointInRing(v vec, r []vec) (inside, onEdge bool) {
	for k := 0; k+1 < len(r); k++ {
		a, b := r[k], r[k+1]
		if orient(a, b, v) == 0 && onSegment(a, b, v) {
			return false, true
		}
		if (a.y > v.y) != (b.y > v.y) && v.x < a.x+(v.y-a.y)*(b.x-a.x)/(b.y-a.y) {
			inside = !inside
		}
	}
	return inside, false
}

// seamTol is how far (degrees, ~0.1 mm) an edge may sit from another and
// still count as the same line: unwrapping ±180 can differ by an ulp.
const seamTol = 1e-9

// interiorSide is +1 if the polygon's interior lies left of the ring's
// edges, -1 if right: the ring's winding, flipped for holes.
func interiorSide(ring []vec, hole bool) float64 {
	var area2 float64
	for k := 0; k+1 < len(ring); k++ {
		area2 += ring[k].x*ring[k+1].y - ring[k+1].x*ring[k].y
	}
	side := 1.0
	if area2 < 0 {
		side = -1
	}
	if hole {
		side = -side
	}
	return side
}

// markSeams finds edges wholly covered by collinear edges of other polygons
// of the same MultiPolygon whose interior lies on the other side: such an
// edge is inside the union. Only edges whose boxes overlap can be
// collinear and overlapping, so they are found by boxPairs.
func markSeams(polys []polyGeo) {
	sides := make([][]float64, len(polys))
	var es []edge
	for pi := range polys {
		for ri, ring := range polys[pi].rings {
			sides[pi] = append(sides[pi], interiorSide(ring, ri > 0))
			es = appendEdges(es, ring, pi, ri)
		}
	}
	spans := map[*edge][][2]float64{}
	// span adds to e the part of it that f covers from the other side.
	span := func(e, f *edge) {
		a, b, c, d := e.a, e.b, f.a, f.b
		ex, ey := b.x-a.x, b.y-a.y
		l2 := ex*ex + ey*ey
		if l2 == 0 {
			// Distinct vertices whose squared distance underflows (1e-170°
			// apart): no direction to compare, and a span on it would "cover"
			// it with an infinite tolerance.
			return
		}
		l := math.Sqrt(l2)
		if math.Abs(orient(a, b, c)) > seamTol*l || math.Abs(orient(a, b, d)) > seamTol*l {
			return
		}
		// Same direction and same interior side, or opposite and opposite:
		// overlapping interiors, so the edge is real boundary.
		if ((d.x-c.x)*ex+(d.y-c.y)*ey)*sides[e.poly][e.ring]*sides[f.poly][f.ring] > 0 {
			return
		}
		tc := ((c.x-a.x)*ex + (c.y-a.y)*ey) / l2
		td := ((d.x-a.x)*ex + (d.y-a.y)*ey) / l2
		lo, hi := math.Max(math.Min(tc, td), 0), math.Min(math.Max(tc, td), 1)
		if hi > lo {
			spans[e] = append(spans[e], [2]float64{lo, hi})
		}
	}
	boxPairs(es, seamTol, func(e, f *edge) bool {
		if e.poly != f.poly {
			span(e, f)
			span(f, e)
		}
		return true
	})
	for e, sp := range spans {
		l := math.Hypot(e.b.x-e.a.x, e.b.y-e.a.y)
		if !covers(sp, seamTol/l) {
			continue
		}
		p := &polys[e.poly]
		if p.seams == nil {
			p.seams = make([][]bool, len(p.rings))
		}
		if p.seams[e.ring] == nil {
			p.seams[e.ring] = make([]bool, len(p.rings[e.ring])-1)
		}
		p.seams[e.ring][e.k] = true
	}
}

// covers reports whether the spans cover [0, 1] up to tol.
func covers(spans [][2]float64, tol float64) bool {
	slices.SortFunc(spans, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	reach := 0.0
	for _, s := range spans {
		if s[0] > reach+tol {
			return false
		}
		reach = math.Max(reach, s[1])
	}
	return reach >= 1-tol
}

func fmtVec(v vec) string { return fmt.Sprintf("[%g, %g]", v.x, v.y) }

// signedDistance implements Fence.SignedDistance for a compiled shape.
func (s *shape) signedDistance(lat, lon float64) float64 {
	if !(lat >= -90 && lat <= 90) || math.IsNaN(lon) || math.IsInf(lon, 0) {
		return math.NaN()
	}
	lon = normLon(lon)
	if s.circle {
		d := s.radiusM - s.haversineM(lat, lon)
		if math.Abs(d) <= onEdgeM {
			return 0
		}
		return d
	}
	kx := metresPerDegree * math.Cos(lat*degToRad)
	px := wrapDelta(lon - s.lon)
	py := lat - s.lat
	if s.ring0 != nil {
		px += 0 * touchRing(s.ring0)
		inside, minD2, seamD2 := scanRing(s.ring0, nil, px, py, kx, false, math.Inf(1), math.Inf(1))
		return signOf(inside, minD2, seamD2)
	}
	best := math.Inf(-1)
	for i := range s.polys {
		if d := s.polys[i].signedDistance(px, py, kx); d > best {
			best = d
		}
	}
	return best
}

// haversineM is the great-circle distance from the centre, in metres.
func (s *shape) haversineM(lat, lon float64) float64 {
	sinDLat := math.Sin((lat - s.lat) * degToRad / 2)
	sinDLon := math.Sin((lon - s.lon) * degToRad / 2)
	a := sinDLat*sinDLat + s.cosLat*math.Cos(lat*degToRad)*sinDLon*sinDLon
	return 2 * earthRadiusM * math.Asin(math.Sqrt(math.Min(a, 1)))
}

// signedDistance of the point (px, py) (degrees relative to the origin) to
// one polygon; kx scales longitude degrees to metres. One pass does the
// even-odd crossing test and the nearest-edge search, in metres with the
// point at (0, 0). Seam edges take part in the crossing test but not in the
// distance; a point on a seam is inside (it is inside the union).
func (p *polyGeo) signedDistance(px, py, kx float64) float64 {
	// Read one vertex per cache line first. These loads don't depend on
	// each other, so the lines of a cold polygon arrive together; the edge
	// loop would otherwise wait for them one at a time, which costs more
	// than the arithmetic at 100,000 fences. Adding 0 × their sum keeps the
	// loads and never changes px (vertices are finite).
	var touch float64
	for _, ring := range p.rings {
		touch += touchRing(ring)
	}
	px += 0 * touch
	inside := false
	minD2, seamD2 := math.Inf(1), math.Inf(1)
	for r, ring := range p.rings {
		var seams []bool
		if p.seams != nil {
			seams = p.seams[r]
		}
		inside, minD2, seamD2 = scanRing(ring, seams, px, py, kx, inside, minD2, seamD2)
	}
	return signOf(inside, minD2, seamD2)
}

// touchRing reads one vertex per cache line of ring (see
// polyGeo.signedDistance) and returns their sum, which is finite.
func touchRing(ring []vec) float64 {
	var touch float64
	for k := 0; k < len(ring); k += 4 {
		touch += ring[k].x
	}
	return touch + ring[len(ring)-1].x
}

// scanRing carries polyGeo.signedDistance's one pass over the edges of a
// ring: the even-odd crossings of the ray from the point, and the smallest
// squared distance to an edge that is not a seam (minD2) or is one (seamD2).
func scanRing(ring []vec, seams []bool, px, py, kx float64, inside bool, minD2, seamD2 float64) (bool, float64, float64) {
	const ky = metresPerDegree
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
		// Branch-free (whether an edge's nearest point is an end is a
		// coin toss per edge; mispredicting it was 40 % of the time).
		// Same values as the compare-and-assign form: a -0 that max
		// turns into +0 only changes the sign of a zero product.
		t = min(max(t, 0), 1)
		dx, dy := ax+t*ex, ay+t*ey
		d2 := dx*dx + dy*dy
		if seams != nil && seams[k-1] {
			seamD2 = math.Min(seamD2, d2)
		} else {
			minD2 = min(minD2, d2)
		}
		ax, ay = bx, by
	}
	return inside, minD2, seamD2
}

// signOf turns a scan's result into the signed distance.
func signOf(inside bool, minD2, seamD2 float64) float64 {
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
