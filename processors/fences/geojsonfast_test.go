package fences

import (
	"reflect"
	"testing"
)

// canonicalAgrees fails when parseCanonical accepts raw but decodes it
// differently from parseGeometry (or where parseGeometry fails).
func canonicalAgrees(t *testing.T, raw []byte) (accepted bool) {
	t.Helper()
	fast, ok := parseCanonical(raw)
	if !ok {
		return false
	}
	slow, err := parseGeometry(raw)
	if err != nil {
		t.Fatalf("fast path accepted %s, which parseGeometry rejects: %v", raw, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path decodes %s as %v, parseGeometry as %v", raw, fast, slow)
	}
	return true
}

func TestParseCanonicalMatchesParseGeometry(t *testing.T) {
	fs, err := Synthetic(500, 11)
	if err != nil {
		t.Fatal(err)
	}
	fs = append(fs, Demo()...)
	for i := range fs {
		if raw := AppendGeoJSON(nil, fs[i].Geometry); !canonicalAgrees(t, raw) {
			t.Errorf("fast path declined AppendGeoJSON's own output for %s: %s", fs[i].ID, raw)
		}
	}
	declined := []string{
		`{"type":"Point","coordinates":[1,2,3]}`,
		`{"type":"Point","coordinates":[1, 2]}`,
		`{"type":"Point","coordinates":[01,2]}`,
		`{"type":"Point","coordinates":[1e3,2]}`,
		`{"type":"Point","coordinates":[1.,2]}`,
		`{"type":"Point","coordinates":[+1,2]}`,
		`{"type":"Point","coordinates":[1,2]} `,
		`{"type":"Point","coordinates":[1,2]}x`,
		`{"type":"Point","coordinates":[null,2]}`,
		`{"coordinates":[1,2],"type":"Point"}`,
		`{"TYPE":"Point","coordinates":[1,2]}`,
		`{"type":"Polygon","coordinates":[]}`,
		`{"type":"Polygon","coordinates":[[]]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]`,
		`{"type":"MultiPolygon","coordinates":[]}`,
		`{"type":"LineString","coordinates":[[0,0],[1,1]]}`,
		`null`, ``,
	}
	for _, raw := range declined {
		if canonicalAgrees(t, []byte(raw)) {
			t.Errorf("fast path accepted %s; it should leave it to parseGeometry", raw)
		}
	}
	for _, raw := range []string{
		`{"type":"Point","coordinates":[-0,0.5]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]],[[0.2,0.1],[0.3,0.1],[0.3,0.2],[0.2,0.1]]]}`,
		`{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],[[[5,5],[6,5],[6,6],[5,5]]]]}`,
	} {
		if !canonicalAgrees(t, []byte(raw)) {
			t.Errorf("fast path declined canonical %s", raw)
		}
	}
}

func FuzzParseCanonical(f *testing.F) {
	f.Add([]byte(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}`))
	f.Add([]byte(`{"type":"Point","coordinates":[13.4,52.5]}`))
	f.Add([]byte(`{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]]]}`))
	f.Fuzz(func(t *testing.T, raw []byte) { canonicalAgrees(t, raw) })
}
