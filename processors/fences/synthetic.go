package fences

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/paulmach/orb"
)

// SyntheticArea is the box Synthetic spreads fences over: about Germany
// (860 × 620 km).
func SyntheticArea() Bounds { return Bounds{South: 47.3, West: 5.9, North: 55.0, East: 15.0} }

// Synthetic returns n valid fences for scale tests and benchmarks,
// deterministic for a seed: every fifth a circle (radius 50 m–1 km), the
// others star-shaped polygons of 10–60 vertices (50 m–1 km from their
// centre), placed uniformly over SyntheticArea. Ids are "syn-" and a
// zero-padded index, so a second call with a larger n extends the first.
func Synthetic(n int, seed uint64) ([]Fence, error) {
	out := make([]Fence, 0, n)
	for i := range n {
		f, err := SyntheticFence(i, seed)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// SyntheticFence is fence i of Synthetic(_, seed), alone: the same id, a
// shape drawn from (seed, i), so an update can replace it in place.
func SyntheticFence(i int, seed uint64) (Fence, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	a := SyntheticArea()
	lat := a.South + rng.Float64()*(a.North-a.South)
	lon := a.West + rng.Float64()*(a.East-a.West)
	id := fmt.Sprintf("syn-%07d", i)
	kxLat := metresPerDegree * math.Cos(lat*degToRad)
	if i%5 == 4 {
		return NewCircleFence(id, id, lat, lon, 50+rng.Float64()*950, Settings{})
	}
	k := 10 + rng.IntN(51)
	rmax := 50 + rng.Float64()*950
	ring := make(orb.Ring, 0, k+1)
	for j := range k {
		// Increasing angles around the centre keep the ring simple.
		t := (float64(j) + 0.2 + 0.6*rng.Float64()) / float64(k) * 2 * math.Pi
		r := rmax * (0.3 + 0.7*rng.Float64())
		ring = append(ring, orb.Point{lon + r*math.Cos(t)/kxLat, lat + r*math.Sin(t)/metresPerDegree})
	}
	ring = append(ring, ring[0])
	return NewPolygonFence(id, id, orb.Polygon{ring}, Settings{})
}
