package fences

import (
	"math"
	"slices"
)

// Chord returns how much of the straight segment from (lat1, lon1) to
// (lat2, lon2) lies inside the fence, in metres, and the fraction along the
// segment (0 at the first point, 1 at the second) of the middle of its
// longest inside stretch; midFrac is NaN when nothing of it is inside. The
// segment is planar in local metres (equirectangular about its first point,
// like SignedDistance): exact enough for the few kilometres between two fixes.
// It allocates; the debouncer calls it only for fences with Crossing on.
func (f *Fence) Chord(lat1, lon1, lat2, lon2 float64) (insideM, midFrac float64) {
	geo := f.compiled()
	if geo == nil || !validPosition(lat1, lon1) || !validPosition(lat2, lon2) {
		return 0, math.NaN()
	}
	kx := metresPerDegree * math.Cos((lat1+lat2)/2*degToRad)
	// Local metres with the first fix at the origin.
	local := func(lat, lon float64) vec {
		return vec{wrapDelta(lon-lon1) * kx, (lat - lat1) * metresPerDegree}
	}
	d := local(lat2, lon2)
	length := math.Hypot(d.x, d.y)
	if length == 0 {
		return 0, math.NaN()
	}
	ts := []float64{0, 1}
	if geo.circle {
		c := local(geo.lat, geo.lon)
		// |t·d − c|² = r²: a t² − 2 b t + (|c|² − r²) = 0.
		a, b := d.x*d.x+d.y*d.y, d.x*c.x+d.y*c.y
		disc := b*b - a*(c.x*c.x+c.y*c.y-geo.radiusM*geo.radiusM)
		if disc <= 0 {
			return 0, math.NaN()
		}
		r := math.Sqrt(disc)
		t0, t1 := max((b-r)/a, 0), min((b+r)/a, 1)
		if t1 <= t0 {
			return 0, math.NaN()
		}
		return (t1 - t0) * length, (t0 + t1) / 2
	}
	for i := range geo.polys {
		for _, ring := range geo.polys[i].rings {
			for k := 0; k+1 < len(ring); k++ {
				a := local(geo.lat+ring[k].y, geo.lon+ring[k].x)
				b := local(geo.lat+ring[k+1].y, geo.lon+ring[k+1].x)
				e := vec{b.x - a.x, b.y - a.y}
				den := d.x*e.y - d.y*e.x
				if den == 0 { // parallel: the stretch tests below see it
					continue
				}
				t := (a.x*e.y - a.y*e.x) / den
				u := (a.x*d.y - a.y*d.x) / den
				if u >= 0 && u <= 1 && t > 0 && t < 1 {
					ts = append(ts, t)
				}
			}
		}
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	// Each stretch between consecutive crossings is wholly in or out: test
	// its middle, and merge adjacent inside stretches.
	midFrac = math.NaN()
	var runStart, best float64
	in := false
	for i := 0; i+1 < len(ts); i++ {
		m := (ts[i] + ts[i+1]) / 2
		inside := geo.signedDistance(lat1+(lat2-lat1)*m, lon1+wrapDelta(lon2-lon1)*m) >= 0
		switch {
		case inside && !in:
			runStart, in = ts[i], true
		case !inside && in:
			insideM, best, midFrac = closeRun(runStart, ts[i], length, insideM, best, midFrac)
			in = false
		}
	}
	if in {
		insideM, best, midFrac = closeRun(runStart, 1, length, insideM, best, midFrac)
	}
	return insideM, midFrac
}

// closeRun adds the inside stretch [t0, t1] to the total and keeps the
// middle of the longest stretch.
func closeRun(t0, t1, length, total, best, mid float64) (float64, float64, float64) {
	total += (t1 - t0) * length
	if t1-t0 > best {
		best, mid = t1-t0, (t0+t1)/2
	}
	return total, best, mid
}
