package fences

import (
	"os"
	"testing"
	"time"

	"github.com/paulmach/orb"
)

func TestDemoIsValid(t *testing.T) {
	protos, err := ParseFeatureCollection(DemoGeoJSON())
	if err != nil {
		t.Fatalf("demo.geojson rejected: %v", err)
	}
	fs := Demo()
	if len(fs) != len(protos) || len(fs) < 30 || len(fs) > 40 {
		t.Fatalf("Demo() has %d fences, file %d; want the same, 30..40", len(fs), len(protos))
	}
	var circles, polys, withHoles int
	for i := range fs {
		f := &fs[i]
		b := f.Bounds()
		// Around Berlin, and of the intended sizes.
		if b.South < 52.3 || b.North > 52.7 || b.West < 13.0 || b.East > 13.8 {
			t.Errorf("%s: bounds %+v are not around Berlin", f.ID, b)
		}
		if f.IsCircle() {
			circles++
			if f.RadiusM < 150 || f.RadiusM > 800 {
				t.Errorf("%s: radius %v m outside 150..800", f.ID, f.RadiusM)
			}
		} else {
			polys++
			// Polygons span 300 m–3.5 km (the airport more).
			w := (b.East - b.West) * kx((b.North+b.South)/2)
			h := (b.North - b.South) * metresPerDegree
			if ext := max(w, h); f.ID != "airport-ber" && (ext < 300 || ext > 3500) {
				t.Errorf("%s: %0.f × %0.f m, want 300 m..3.5 km", f.ID, w, h)
			}
			for _, p := range f.geo.polys {
				if len(p.rings) > 1 {
					withHoles++
				}
			}
		}
		// Every fence contains its own centre or at least one point: the
		// box centre of a convex-ish demo fence is inside.
		if f.IsCircle() && !f.Contains(f.Geometry.Bound().Center().Lat(), f.Geometry.Bound().Center().Lon()) {
			t.Errorf("%s: circle does not contain its centre", f.ID)
		}
		// Protobuf round trip keeps the fence.
		p, err := f.ToProto()
		if err != nil {
			t.Fatalf("%s: ToProto: %v", f.ID, err)
		}
		g, err := FenceFromProto(p)
		if err != nil {
			t.Fatalf("%s: FenceFromProto(ToProto): %v", f.ID, err)
		}
		if g.ID != f.ID || g.Name != f.Name || g.Settings != f.Settings || g.RadiusM != f.RadiusM || g.Bounds() != f.Bounds() {
			t.Errorf("%s: proto round trip changed the fence: %+v -> %+v", f.ID, f, g)
		}
	}
	if circles < 10 || polys < 10 || withHoles < 2 {
		t.Errorf("demo has %d circles, %d polygons, %d polygons with holes", circles, polys, withHoles)
	}
	t.Logf("%d fences: %d circles, %d polygons, %d with holes", len(fs), circles, polys, withHoles)
}

// TestExampleFile checks example.geojson, the file the README loads with
// fencectl fences load: one fence of each kind, each with its own settings.
func TestExampleFile(t *testing.T) {
	data, err := os.ReadFile("example.geojson")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ParseFences(data)
	if err != nil {
		t.Fatalf("example.geojson rejected: %v", err)
	}
	byID := map[string]Fence{}
	for _, f := range fs {
		byID[f.ID] = f
	}
	want := map[string]Settings{
		"example-museumsinsel":         {MinSamples: 3, MinDwell: 30 * time.Second, HysteresisM: 15},
		"example-tempelhof-hasenheide": {Loiter: 15 * time.Minute, SilenceTimeout: 10 * time.Minute},
		"example-fernsehturm":          {MinSamples: 2, MinDwell: 10 * time.Second, HysteresisM: 20},
	}
	if len(fs) != len(want) {
		t.Fatalf("%d fences, want %d", len(fs), len(want))
	}
	for id, s := range want {
		f, ok := byID[id]
		if !ok {
			t.Fatalf("no fence %s", id)
		}
		if f.Settings != s {
			t.Errorf("%s: settings %+v, want %+v", id, f.Settings, s)
		}
	}
	if _, ok := byID["example-museumsinsel"].Geometry.(orb.Polygon); !ok {
		t.Error("example-museumsinsel is not a polygon")
	}
	mp := byID["example-tempelhof-hasenheide"]
	if g, ok := mp.Geometry.(orb.MultiPolygon); !ok || len(g) != 2 || len(g[0]) != 2 {
		t.Errorf("example-tempelhof-hasenheide is not a multipolygon of two parts, the first with a hole: %T", mp.Geometry)
	}
	// The hole is outside, the rest of its polygon inside.
	if mp.Contains(52.474, 13.4025) || !mp.Contains(52.470, 13.395) || !mp.Contains(52.485, 13.42) {
		t.Error("example-tempelhof-hasenheide: hole or parts wrong")
	}
	if c := byID["example-fernsehturm"]; !c.IsCircle() || c.RadiusM != 120 {
		t.Errorf("example-fernsehturm: circle %v radius %v", c.IsCircle(), c.RadiusM)
	}
}
