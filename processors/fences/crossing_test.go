package fences_test

import (
	"math"
	"testing"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/paulmach/orb"
)

// TestChord: the inside length and the middle of the inside stretch of a
// segment through a circle and through a concave polygon.
func TestChord(t *testing.T) {
	const lat0, lon0 = 52.5, 13.4
	kx := 111_320 * math.Cos(lat0*math.Pi/180)
	pt := func(e, n float64) (float64, float64) { return lat0 + n/111_320, lon0 + e/kx }
	c, err := fences.NewCircleFence("c", "", lat0, lon0, 100, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	la, oa := pt(-200, 60)
	lb, ob := pt(600, 60)
	m, mid := c.Chord(la, oa, lb, ob)
	if math.Abs(m-160) > 1 || math.Abs(mid-0.25) > 0.002 {
		t.Errorf("circle: %v m at %v, want 160 m at 0.25", m, mid)
	}
	la, oa = pt(-300, 150)
	lb, ob = pt(300, 150)
	if m, mid := c.Chord(la, oa, lb, ob); m != 0 || !math.IsNaN(mid) {
		t.Errorf("circle missed: %v m at %v, want 0 and NaN", m, mid)
	}
	// A U: prongs 120 m (x −170..−50) and 100 m (50..150) wide, joined
	// below y = −50.
	var ring orb.Ring
	for _, v := range [][2]float64{{-170, -150}, {150, -150}, {150, 150}, {50, 150}, {50, -50}, {-50, -50}, {-50, 150}, {-170, 150}, {-170, -150}} {
		lat, lon := pt(v[0], v[1])
		ring = append(ring, orb.Point{lon, lat})
	}
	u, err := fences.NewPolygonFence("u", "", orb.Polygon{ring}, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	la, oa = pt(-300, 0)
	lb, ob = pt(500, 0)
	m, mid = u.Chord(la, oa, lb, ob)
	// Inside from −170 to −50 and 50 to 150: 220 m; the longer stretch's
	// middle is at −110, 190 m of 800.
	if math.Abs(m-220) > 1 || math.Abs(mid-0.2375) > 0.002 {
		t.Errorf("U: %v m at %v, want 220 m at 0.2375", m, mid)
	}
}
