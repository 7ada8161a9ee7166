package fences

import (
	"errors"
	"math"
	"testing"

	"github.com/paulmach/orb"
)

// kx is the equirectangular metres per degree of longitude at lat.
func kx(lat float64) float64 { return metresPerDegree * math.Cos(lat*math.Pi/180) }

func mustPolygon(t testing.TB, g orb.Geometry) Fence {
	t.Helper()
	f, err := NewPolygonFence("f", "", g, Settings{})
	if err != nil {
		t.Fatalf("NewPolygonFence: %v", err)
	}
	return f
}

// box is an axis-aligned ring [west..east]×[south..north].
func box(south, west, north, east float64) orb.Ring {
	return orb.Ring{{west, south}, {east, south}, {east, north}, {west, north}, {west, south}}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestSignedDistanceSquare(t *testing.T) {
	// 0.01° × 0.016° around (52.5, 13.4).
	const lat0, lon0, hLat, hLon = 52.5, 13.4, 0.005, 0.008
	sq := mustPolygon(t, orb.Polygon{box(lat0-hLat, lon0-hLon, lat0+hLat, lon0+hLon)})
	tri := mustPolygon(t, orb.Polygon{{{13.4, 52.5}, {13.41, 52.5}, {13.4, 52.51}, {13.4, 52.5}}})

	tests := []struct {
		name     string
		f        *Fence
		lat, lon float64
		want     float64
		tol      float64
	}{
		// East/west edges are nearer than north/south: 0.008° × 111320 × cos 52.5° = 542.1 m < 556.6 m.
		{"centre", &sq, lat0, lon0, hLon * kx(lat0), 1e-6},
		{"inside near north edge", &sq, lat0 + hLat - 0.001, lon0, 0.001 * metresPerDegree, 1e-6},
		{"outside east", &sq, lat0, lon0 + hLon + 0.002, -0.002 * kx(lat0), 1e-6},
		{"outside south", &sq, lat0 - hLat - 0.0005, lon0 + 0.001, -0.0005 * metresPerDegree, 1e-6},
		{"outside north-east corner", &sq, lat0 + hLat + 0.001, lon0 + hLon + 0.001,
			-math.Hypot(0.001*kx(lat0+hLat+0.001), 0.001*metresPerDegree), 1e-6},
		{"far outside", &sq, lat0 + 1, lon0, -(1 - hLat) * metresPerDegree, 1e-6},
		{"on south edge", &sq, lat0 - hLat, lon0 + 0.003, 0, 0},
		{"on east edge", &sq, lat0 + 0.001, lon0 + hLon, 0, 0},
		{"on vertex", &sq, lat0 + hLat, lon0 - hLon, 0, 0},
		{"on closing vertex", &sq, lat0 - hLat, lon0 - hLon, 0, 0},
		{"on diagonal edge midpoint", &tri, 52.505, 13.405, 0, 0},
		{"on triangle apex", &tri, 52.51, 13.4, 0, 0},
		{"just outside diagonal", &tri, 52.5051, 13.4051, -1, 1}, // metres: small and negative
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f.SignedDistance(tt.lat, tt.lon)
			if tt.name == "just outside diagonal" {
				if !(got < 0 && got > -20) {
					t.Fatalf("SignedDistance = %v, want small negative", got)
				}
				return
			}
			if !near(got, tt.want, tt.tol) {
				t.Fatalf("SignedDistance(%v, %v) = %.9f, want %.9f ± %g", tt.lat, tt.lon, got, tt.want, tt.tol)
			}
			if want := tt.want >= 0; tt.f.Contains(tt.lat, tt.lon) != want {
				t.Fatalf("Contains = %v, want %v", !want, want)
			}
		})
	}
}

func TestSignedDistanceHoles(t *testing.T) {
	// Outer 0.02° square with a 0.01° square hole in the middle.
	outer := box(52.49, 13.39, 52.51, 13.41)
	hole := box(52.495, 13.395, 52.505, 13.405)
	poly := mustPolygon(t, orb.Polygon{outer, hole})
	// The same as one polygon of a MultiPolygon, plus a separate island
	// inside the hole (legal: it is another polygon).
	island := box(52.499, 13.399, 52.501, 13.401)
	multi := mustPolygon(t, orb.MultiPolygon{{outer, hole}, {island}})

	tests := []struct {
		name     string
		f        *Fence
		lat, lon float64
		want     float64
	}{
		{"hole centre is outside", &poly, 52.5, 13.4, -0.005 * kx(52.5)},
		{"ring between hole and outer is inside", &poly, 52.5, 13.4075, 0.0025 * kx(52.5)},
		{"in the hole near its north edge", &poly, 52.504, 13.4, -0.001 * metresPerDegree},
		{"on the hole's edge counts as inside", &poly, 52.505, 13.4, 0},
		{"on the hole's vertex", &poly, 52.495, 13.395, 0},
		{"outside everything", &poly, 52.48, 13.4, -0.01 * metresPerDegree},
		{"multi: island in the hole is inside", &multi, 52.5, 13.4, 0.001 * kx(52.5)},
		{"multi: hole around the island is outside", &multi, 52.5, 13.4025, -0.0015 * kx(52.5)},
		{"multi: ring is inside", &multi, 52.5, 13.4075, 0.0025 * kx(52.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.SignedDistance(tt.lat, tt.lon); !near(got, tt.want, 1e-6) {
				t.Fatalf("SignedDistance = %.6f, want %.6f", got, tt.want)
			}
			if got, want := tt.f.Contains(tt.lat, tt.lon), tt.want >= 0; got != want {
				t.Fatalf("Contains = %v, want %v", got, want)
			}
		})
	}

	// The demo's Tiergarten: the Neuer See is a hole.
	for _, f := range Demo() {
		if f.ID != "park-tiergarten" {
			continue
		}
		if f.Contains(52.5108, 13.3445) {
			t.Error("a point in the Neuer See is inside the Tiergarten fence")
		}
		if !f.Contains(52.5145, 13.3500) {
			t.Error("a point in the park is outside the Tiergarten fence")
		}
	}
}

func TestSignedDistanceCircle(t *testing.T) {
	const lat0, lon0, r = 52.52, 13.405, 500.0
	c, err := NewCircleFence("c", "", lat0, lon0, r, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	// Metres per degree of latitude on the haversine sphere.
	mPerDegLat := earthRadiusM * math.Pi / 180
	tests := []struct {
		name     string
		lat, lon float64
		want     float64
		tol      float64
	}{
		{"centre", lat0, lon0, r, 1e-9},
		{"200 m north", lat0 + 200/mPerDegLat, lon0, 300, 1e-6},
		{"600 m south", lat0 - 600/mPerDegLat, lon0, -100, 1e-6},
		{"on the circle (north)", lat0 + r/mPerDegLat, lon0, 0, 1e-6},
		{"~2 km east", lat0, lon0 + 0.03, r - 0.03*mPerDegLat*math.Cos(lat0*math.Pi/180), 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.SignedDistance(tt.lat, tt.lon); !near(got, tt.want, tt.tol) {
				t.Fatalf("SignedDistance = %.9f, want %.9f ± %g", got, tt.want, tt.tol)
			}
		})
	}
	if !c.Contains(lat0+r/mPerDegLat, lon0) {
		t.Error("a point on the circle is not contained")
	}
}

func TestAntimeridian(t *testing.T) {
	// A 1° × 1° box over Fiji's longitudes, written the way it crosses.
	crossing := mustPolygon(t, orb.Polygon{{{179.5, -17}, {-179.5, -17}, {-179.5, -16}, {179.5, -16}, {179.5, -17}}})
	// The same area split at the antimeridian, as RFC 7946 recommends.
	split := mustPolygon(t, orb.MultiPolygon{
		{box(-17, 179.5, -16, 180)},
		{box(-17, -180, -16, -179.5)},
	})
	circle, err := NewCircleFence("c", "", -16.5, 180, 20_000, Settings{})
	if err != nil {
		t.Fatal(err)
	}

	for _, f := range []*Fence{&crossing, &split} {
		b := f.Bounds()
		if !b.CrossesAntimeridian() || b.West != 179.5 || b.East != -179.5 {
			t.Errorf("Bounds = %+v, want West 179.5 > East -179.5", b)
		}
		tests := []struct {
			lat, lon float64
			want     float64 // metres, 0 = just check the sign
			inside   bool
		}{
			{-16.5, 179.9, 0.4 * kx(-16.5), true}, // nearest edge: 179.5, 0.4° west
			{-16.5, -179.9, 0.4 * kx(-16.5), true},
			{-16.5, 180, 0.5 * kx(-16.5), true},
			{-16.5, -180, 0.5 * kx(-16.5), true},
			{-16.5, 540, 0.5 * kx(-16.5), true}, // longitudes are taken modulo 360
			{-16.5, 179.4, -0.1 * kx(-16.5), false},
			{-16.5, -179.4, -0.1 * kx(-16.5), false},
			{-16.5, 0, 0, false},
			{-16, -179.7, 0, true}, // on the north edge
		}
		for _, tt := range tests {
			got := f.SignedDistance(tt.lat, tt.lon)
			if f.Contains(tt.lat, tt.lon) != tt.inside || (tt.inside && got < 0) || (!tt.inside && got >= 0) {
				t.Errorf("(%v, %v): SignedDistance %v, want inside=%v", tt.lat, tt.lon, got, tt.inside)
			}
			if tt.want != 0 && !near(got, tt.want, 1e-3) {
				t.Errorf("(%v, %v): SignedDistance %.6f, want %.6f", tt.lat, tt.lon, got, tt.want)
			}
		}
	}
	for _, lon := range []float64{179.95, -179.95, 180, -180} {
		if !circle.Contains(-16.5, lon) {
			t.Errorf("circle on the antimeridian does not contain lon %v", lon)
		}
	}
	if b := circle.Bounds(); !b.CrossesAntimeridian() {
		t.Errorf("circle bounds %+v should cross the antimeridian", b)
	}

	// The catalogue finds each of them once from either side.
	c := New()
	crossing.ID, split.ID, circle.ID = "crossing", "split", "circle"
	if err := c.Apply(1, []Fence{crossing, split, circle}, nil); err != nil {
		t.Fatal(err)
	}
	for _, lon := range []float64{179.9, -179.9, 180, -180, 179.999999, -179.999999} {
		seen := map[string]int{}
		c.Snapshot().Near(-16.5, lon, 50, func(f *Fence) bool { seen[f.ID]++; return true })
		if seen["crossing"] != 1 || seen["split"] != 1 || seen["circle"] != 1 || len(seen) != 3 {
			t.Errorf("Near(-16.5, %v) visited %v, want each fence once", lon, seen)
		}
	}
}

func TestSignedDistanceInvalidPoint(t *testing.T) {
	sq := mustPolygon(t, orb.Polygon{box(52, 13, 53, 14)})
	for _, p := range [][2]float64{{math.NaN(), 13.5}, {52.5, math.NaN()}, {91, 13.5}, {52.5, math.Inf(1)}} {
		if d := sq.SignedDistance(p[0], p[1]); !math.IsNaN(d) {
			t.Errorf("SignedDistance(%v) = %v, want NaN", p, d)
		}
		if sq.Contains(p[0], p[1]) {
			t.Errorf("Contains(%v) = true", p)
		}
	}
	// A hand-built invalid fence never contains anything.
	bad := Fence{ID: "x", Geometry: orb.Polygon{{{13, 52}, {14, 52}, {13, 53}}}}
	if !math.IsNaN(bad.SignedDistance(52.1, 13.1)) {
		t.Error("an invalid hand-built fence has a distance")
	}
	// A hand-built valid one works without a constructor.
	good := Fence{ID: "y", Geometry: orb.Polygon{box(52, 13, 53, 14)}}
	if !good.Contains(52.5, 13.5) {
		t.Error("hand-built fence does not contain its centre")
	}
}

func TestMultiPolygonSeams(t *testing.T) {
	// Two boxes sharing the edge lon 13.41: the union is one 0.02° × 0.01°
	// box, and the shared edge is not boundary.
	left, right := box(52.5, 13.40, 52.51, 13.41), box(52.5, 13.41, 52.51, 13.42)
	adjacent := mustPolygon(t, orb.MultiPolygon{{left}, {right}})
	// Reversed winding on one of them must not matter.
	rev := slicesReverse(right)
	adjacentRev := mustPolygon(t, orb.MultiPolygon{{left}, {rev}})
	for _, f := range []*Fence{&adjacent, &adjacentRev} {
		// On the shared edge: the nearest real boundary is north/south, 0.005°.
		if got, want := f.SignedDistance(52.505, 13.41), 0.005*metresPerDegree; !near(got, want, 1e-6) {
			t.Errorf("on the seam: SignedDistance = %v, want %v", got, want)
		}
		if got, want := f.SignedDistance(52.505, 13.409), 0.005*metresPerDegree; !near(got, want, 1e-6) {
			t.Errorf("next to the seam: SignedDistance = %v, want %v", got, want)
		}
	}
	// Overlapping boxes with a common edge on the same side: that edge is
	// real boundary.
	stacked := mustPolygon(t, orb.MultiPolygon{{box(52.5, 13.40, 52.51, 13.41)}, {box(52.5, 13.40, 52.505, 13.41)}})
	if got := stacked.SignedDistance(52.5, 13.405); got != 0 {
		t.Errorf("on the common south edge of stacked boxes: SignedDistance = %v, want 0", got)
	}
}

func slicesReverse(r orb.Ring) orb.Ring {
	out := make(orb.Ring, len(r))
	for i := range r {
		out[len(r)-1-i] = r[i]
	}
	return out
}

func TestNaNCoordinatesRejected(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		g    orb.Geometry
	}{
		{"NaN longitude", orb.Polygon{{{13.40, 52.50}, {nan, 52.50}, {13.41, 52.51}, {13.40, 52.50}}}},
		{"NaN latitude", orb.Polygon{{{13.40, 52.50}, {13.41, nan}, {13.41, 52.51}, {13.40, 52.50}}}},
		{"infinite", orb.MultiPolygon{{{{13.40, 52.50}, {math.Inf(1), 52.50}, {13.41, 52.51}, {13.40, 52.50}}}}},
		{"NaN in a hole", orb.Polygon{box(52.5, 13.4, 52.51, 13.41), {{13.402, 52.502}, {nan, nan}, {13.404, 52.504}, {13.402, 52.502}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewPolygonFence("n", "", tc.g, Settings{}); !errors.Is(err, ErrInvalidCoordinates) {
				t.Errorf("NewPolygonFence: err = %v, want ErrInvalidCoordinates", err)
			}
			if err := New().Apply(1, []Fence{{ID: "n", Geometry: tc.g}}, nil); !errors.Is(err, ErrInvalidCoordinates) {
				t.Errorf("Apply: err = %v, want ErrInvalidCoordinates", err)
			}
		})
	}
	if _, err := NewCircleFence("c", "", nan, 13.4, 100, Settings{}); !errors.Is(err, ErrInvalidCoordinates) {
		t.Errorf("NaN circle centre: err = %v", err)
	}
	if _, err := NewCircleFence("c", "", 52.5, 13.4, nan, Settings{}); !errors.Is(err, ErrInvalidRadius) {
		t.Errorf("NaN radius: err = %v", err)
	}
	if _, err := NewCircleFence("c", "", 52.5, 13.4, 100, Settings{HysteresisM: nan}); !errors.Is(err, ErrInvalidProperty) {
		t.Errorf("NaN hysteresis: err = %v", err)
	}
}
