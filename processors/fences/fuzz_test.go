package fences

import (
	"math"
	"testing"
	"unicode/utf8"

	"github.com/paulmach/orb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Geometry seeds shared by both fuzz targets: every shape the parser
// accepts, and the tricky ones it must refuse.
var fuzzGeometries = []string{
	`{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]]}`,
	`{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.51],[13.41,52.50],[13.40,52.51],[13.40,52.50]]]}`,
	`{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]],[[2,2],[2,8],[8,8],[8,2],[2,2]]]}`,
	`{"type":"MultiPolygon","coordinates":[[[[179,-1],[180,-1],[180,1],[179,1],[179,-1]]],[[[-180,-1],[-179,-1],[-179,1],[-180,1],[-180,-1]]]]}`,
	`{"type":"MultiPolygon","coordinates":[[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.50]]],[[[13.50,52.50],[13.51,52.50],[13.51,52.51],[13.50,52.50]]]]}`,
	`{"type":"Polygon","coordinates":[[[170,80],[-170,80],[-170,90],[170,90],[170,80]]]}`,
	`{"type":"Point","coordinates":[13.4,52.5,34.0]}`,
	`{"type":"Point","coordinates":[180,90]}`,
	`{"type":"Polygon","coordinates":[[[1e-300,0],[2e-300,0],[2e-300,1e-300],[1e-300,0]]]}`,
	`{"type":"MultiPolygon","coordinates":[[[[1e-170,0],[2e-170,0],[2e-170,1e-170],[1e-170,0]]],[[[3e-170,0],[4e-170,0],[4e-170,1e-170],[3e-170,0]]]]}`,
	`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]],"extra":null}`,
	`{"type":"LineString","coordinates":[[13.4,52.5],[13.5,52.5]]}`,
	`null`,
}

// FuzzParseFeatureCollection: parsing any bytes never panics; it returns an
// error and no fence, or fences that are all valid (see checkFuzzFence).
func FuzzParseFeatureCollection(f *testing.F) {
	f.Add(DemoGeoJSON(), 52.52, 13.40)
	for _, g := range fuzzGeometries {
		f.Add(fc(good, feature(`"id":"f","radius_m":120,"min_samples":2,"min_dwell_s":1.5,"hysteresis_m":5`, g)), 52.505, 13.405)
		f.Add(fc(feature(`"id":"f"`, g)), 0.5, 179.5)
	}
	f.Add(fc(good, good), 52.505, 13.405) // duplicate id
	f.Add([]byte(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"\ud800"},"geometry":null}]}`), 0.0, 0.0)
	f.Fuzz(func(t *testing.T, data []byte, lat, lon float64) {
		fs, err := ParseFences(data)
		protos, perr := ParseFeatureCollection(data)
		if (err == nil) != (perr == nil) || len(fs) != len(protos) {
			t.Fatalf("ParseFences (%d, %v) and ParseFeatureCollection (%d, %v) disagree", len(fs), err, len(protos), perr)
		}
		if err != nil {
			if fs != nil || err.Error() == "" {
				t.Fatalf("error %q came with %d fences", err, len(fs))
			}
			return
		}
		ids := map[string]bool{}
		for i := range fs {
			if ids[fs[i].ID] {
				t.Fatalf("duplicate id %q accepted", fs[i].ID)
			}
			ids[fs[i].ID] = true
			checkFuzzFence(t, &fs[i], lat, lon)
		}
		checkFuzzCatalogue(t, fs, lat, lon)
	})
}

// FuzzFenceFromProto: a fences-topic record with any geometry bytes and
// radius is refused or yields a valid fence.
func FuzzFenceFromProto(f *testing.F) {
	for _, g := range fuzzGeometries {
		f.Add([]byte(g), 0.0, 52.505, 13.405)
		f.Add([]byte(g), 150.0, 0.5, 179.5)
	}
	f.Fuzz(func(t *testing.T, geometry []byte, radiusM, lat, lon float64) {
		fence, err := FenceFromProto(&geofencepb.Fence{FenceId: "f", GeometryGeojson: geometry, RadiusM: radiusM})
		if err != nil {
			return
		}
		checkFuzzFence(t, &fence, lat, lon)
		checkFuzzCatalogue(t, []Fence{fence}, lat, lon)
	})
}

// checkFuzzFence asserts what the pipeline relies on for an accepted fence:
// a usable Kafka key as id, a sane box, and finite, consistent distances for
// every valid point (NaN would silently freeze a device's state machine),
// identical after a trip through the fences topic's protobuf form.
func checkFuzzFence(t *testing.T, f *Fence, lat, lon float64) {
	t.Helper()
	if f.ID == "" || !utf8.ValidString(f.ID) || len(f.ID) > MaxIDBytes || !utf8.ValidString(f.Name) {
		t.Fatalf("accepted fence has id %q, name %q", f.ID, f.Name)
	}
	b := f.Bounds()
	if !(b.South <= b.North && b.South >= -90 && b.North <= 90 && b.West >= -180 && b.West <= 180 && b.East >= -180 && b.East <= 180) {
		t.Fatalf("fence %q: bounds %+v", f.ID, b)
	}
	p, err := f.ToProto()
	if err != nil {
		t.Fatalf("fence %q: ToProto: %v", f.ID, err)
	}
	back, err := FenceFromProto(p)
	if err != nil {
		t.Fatalf("fence %q: its own protobuf form %s is refused: %v", f.ID, p.GetGeometryGeojson(), err)
	}
	if back.Settings != f.Settings || back.RadiusM != f.RadiusM || back.Name != f.Name {
		t.Fatalf("fence %q: protobuf round trip changed settings %+v -> %+v", f.ID, f.Settings, back.Settings)
	}
	for _, q := range fuzzProbes(f, lat, lon) {
		d := f.SignedDistance(q[0], q[1])
		if math.IsNaN(d) || math.IsInf(d, 0) {
			t.Fatalf("fence %q %s: SignedDistance(%v, %v) = %v", f.ID, AppendGeoJSON(nil, f.Geometry), q[0], q[1], d)
		}
		if f.Contains(q[0], q[1]) != (d >= 0) {
			t.Fatalf("fence %q: Contains disagrees with SignedDistance %v", f.ID, d)
		}
		if d2 := back.SignedDistance(q[0], q[1]); d2 != d {
			t.Fatalf("fence %q: distance %v before and %v after the protobuf round trip at (%v, %v)", f.ID, d, d2, q[0], q[1])
		}
		if d > 0 && !b.ContainsPoint(q[0], q[1], 1) {
			t.Fatalf("fence %q contains (%v, %v) (%v m inside) outside its bounds %+v", f.ID, q[0], q[1], d, b)
		}
	}
}

// checkFuzzCatalogue: the index finds every fence that contains a point.
func checkFuzzCatalogue(t *testing.T, fs []Fence, lat, lon float64) {
	t.Helper()
	c := New()
	if err := c.Apply(1, fs, nil); err != nil {
		t.Fatalf("catalogue refused parsed fences: %v", err)
	}
	snap := c.Snapshot()
	for i := range fs {
		for _, q := range fuzzProbes(&fs[i], lat, lon) {
			want := map[string]bool{}
			for _, g := range snap.All() {
				if g.SignedDistance(q[0], q[1]) > 0 {
					want[g.ID] = true
				}
			}
			snap.Near(q[0], q[1], 0, func(g *Fence) bool { delete(want, g.ID); return true })
			if len(want) > 0 {
				t.Fatalf("Near(%v, %v) misses fences %v that contain the point", q[0], q[1], want)
			}
		}
	}
}

// fuzzProbes are valid points around a fence: the fuzzer's own point (when
// valid), the fence's vertices (bounded: the fuzzer can make huge rings),
// points just beside them, and the corners and centre of its box.
func fuzzProbes(f *Fence, lat, lon float64) [][2]float64 {
	var out [][2]float64
	add := func(lat, lon float64) {
		if lat >= -90 && lat <= 90 && !math.IsNaN(lon) && !math.IsInf(lon, 0) {
			out = append(out, [2]float64{lat, lon})
		}
	}
	add(lat, lon)
	b := f.Bounds()
	add(b.South, b.West)
	add(b.North, b.East)
	add((b.South+b.North)/2, (b.West+b.East)/2)
	var pts []orb.Point
	switch g := f.Geometry.(type) {
	case orb.Point:
		pts = []orb.Point{g}
	case orb.Polygon:
		for _, r := range g {
			pts = append(pts, r...)
		}
	case orb.MultiPolygon:
		for _, p := range g {
			for _, r := range p {
				pts = append(pts, r...)
			}
		}
	}
	for i, p := range pts {
		if i == 16 {
			break
		}
		add(p.Lat(), p.Lon())
		add(p.Lat()+1e-5, p.Lon()-1e-5)
		add(p.Lat()-1e-9, p.Lon()+1e-9)
	}
	return out
}
