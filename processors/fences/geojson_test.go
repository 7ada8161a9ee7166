package fences

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// good is a valid feature placed before each bad one, so the tests also
// prove a bad feature rejects the whole file.
const good = `{"type":"Feature","properties":{"id":"good","name":"Good"},"geometry":{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]]}}`

func fc(features ...string) []byte {
	return []byte(`{"type":"FeatureCollection","features":[` + strings.Join(features, ",") + `]}`)
}

func feature(props, geometry string) string {
	return `{"type":"Feature","properties":{` + props + `},"geometry":` + geometry + `}`
}

func polygonGeom(rings ...string) string {
	return `{"type":"Polygon","coordinates":[` + strings.Join(rings, ",") + `]}`
}

func TestParseFeatureCollectionRejects(t *testing.T) {
	square := `[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]`
	tests := []struct {
		name    string
		doc     []byte
		want    error
		index   int    // -1: not a per-feature error
		id      string // expected FenceError.ID
		message string // substring of the error text
	}{
		{"invalid JSON", []byte(`{"type":"FeatureCollection","features":[`), ErrInvalidJSON, -1, "", "invalid JSON"},
		{"NaN literal is invalid JSON", fc(good, feature(`"id":"nan"`, `{"type":"Polygon","coordinates":[[[NaN,52.5],[13.41,52.50],[13.41,52.51],[NaN,52.5]]]}`)), ErrInvalidJSON, -1, "", "invalid character 'N'"},
		{"not a FeatureCollection", []byte(`{"type":"Feature"}`), ErrNotFeatureCollection, -1, "", `"Feature"`},
		{"member is not a Feature", fc(good, `{"type":"Polygon","properties":{"id":"p"}}`), ErrNotFeatureCollection, 1, "p", "want \"Feature\""},
		{"duplicate id", fc(good, feature(`"id":"good"`, polygonGeom(square))), ErrDuplicateID, 1, "good", "already used by fence #0"},
		{"missing id", fc(good, feature(`"name":"x"`, polygonGeom(square))), ErrMissingID, 1, "", "properties.id"},
		{"empty id", fc(good, feature(`"id":""`, polygonGeom(square))), ErrMissingID, 1, "", "missing id"},
		{"numeric id", fc(good, feature(`"id":42`, polygonGeom(square))), ErrInvalidID, 1, "", "must be a string"},
		{"id too long", fc(good, feature(`"id":"`+strings.Repeat("x", 256)+`"`, polygonGeom(square))), ErrInvalidID, 1, strings.Repeat("x", 256), "256 bytes"},
		{"unclosed ring", fc(good, feature(`"id":"open"`, polygonGeom(`[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.505]]`))), ErrUnclosedRing, 1, "open", "ring 0"},
		{"ring with 3 points", fc(good, feature(`"id":"tiny"`, polygonGeom(`[[13.40,52.50],[13.41,52.50],[13.40,52.50]]`))), ErrTooFewPoints, 1, "tiny", "3 positions"},
		{"ring of repeated points", fc(good, feature(`"id":"dup"`, polygonGeom(`[[13.40,52.50],[13.41,52.50],[13.41,52.50],[13.40,52.50]]`))), ErrTooFewPoints, 1, "dup", "distinct"},
		{"polygon with no ring", fc(good, feature(`"id":"none"`, `{"type":"Polygon","coordinates":[]}`)), ErrTooFewPoints, 1, "none", "no ring"},
		{"bow tie", fc(good, feature(`"id":"bowtie"`, polygonGeom(`[[13.40,52.50],[13.41,52.51],[13.41,52.50],[13.40,52.51],[13.40,52.50]]`))), ErrSelfIntersecting, 1, "bowtie", "edges 0 and 2 intersect"},
		{"vertex touching an edge", fc(good, feature(`"id":"touch"`, polygonGeom(`[[13.40,52.50],[13.42,52.50],[13.42,52.52],[13.41,52.50],[13.40,52.52],[13.40,52.50]]`))), ErrSelfIntersecting, 1, "touch", "intersect"},
		{"spike folding back", fc(good, feature(`"id":"spike"`, polygonGeom(`[[13.40,52.50],[13.42,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.50]]`))), ErrSelfIntersecting, 1, "spike", "fold back"},
		{"hole crossing the outer ring", fc(good, feature(`"id":"cross"`, polygonGeom(square, `[[13.405,52.505],[13.415,52.505],[13.415,52.506],[13.405,52.506],[13.405,52.505]]`))), ErrSelfIntersecting, 1, "cross", "ring 1 crosses ring 0"},
		{"hole outside", fc(good, feature(`"id":"hole"`, polygonGeom(square, `[[13.50,52.50],[13.51,52.50],[13.51,52.51],[13.50,52.50]]`))), ErrInvalidHole, 1, "hole", "outside the outer ring"},
		{"latitude out of range", fc(good, feature(`"id":"lat"`, polygonGeom(`[[13.40,52.50],[13.41,91],[13.41,52.51],[13.40,52.50]]`))), ErrInvalidCoordinates, 1, "lat", "position 1"},
		{"longitude out of range", fc(good, feature(`"id":"lon"`, polygonGeom(`[[13.40,52.50],[181,52.50],[13.41,52.51],[13.40,52.50]]`))), ErrInvalidCoordinates, 1, "lon", "position 1"},
		{"huge number", fc(good, feature(`"id":"huge"`, polygonGeom(`[[13.40,52.50],[1e999,52.50],[13.41,52.51],[13.40,52.50]]`))), ErrInvalidCoordinates, 1, "huge", "1e999"},
		{"unknown detector", fc(good, feature(`"id":"det","detector":"bayes"`, polygonGeom(square))), ErrInvalidProperty, 1, "det", `detector "bayes"`},
		{"detector not a string", fc(good, feature(`"id":"det","detector":1`, polygonGeom(square))), ErrInvalidProperty, 1, "det", "properties.detector must be a string"},
		{"null coordinate", fc(good, feature(`"id":"null"`, polygonGeom(`[[13.40,52.50],[null,52.50],[13.41,52.51],[13.40,52.50]]`))), ErrInvalidCoordinates, 1, "null", "contain null"},
		{"position with one value", fc(good, feature(`"id":"short"`, polygonGeom(`[[13.40,52.50],[13.41],[13.41,52.51],[13.40,52.50]]`))), ErrInvalidCoordinates, 1, "short", "1 values"},
		{"LineString", fc(good, feature(`"id":"line"`, `{"type":"LineString","coordinates":[[13.4,52.5],[13.5,52.5]]}`)), ErrUnsupportedGeometry, 1, "line", `"LineString"`},
		{"missing geometry", fc(good, feature(`"id":"nogeom"`, `null`)), ErrUnsupportedGeometry, 1, "nogeom", "missing geometry"},
		{"point without radius", fc(good, feature(`"id":"pt"`, `{"type":"Point","coordinates":[13.4,52.5]}`)), ErrInvalidRadius, 1, "pt", "radius_m > 0"},
		{"point with negative radius", fc(good, feature(`"id":"neg","radius_m":-5`, `{"type":"Point","coordinates":[13.4,52.5]}`)), ErrInvalidRadius, 1, "neg", "-5"},
		{"radius as a string", fc(good, feature(`"id":"str","radius_m":"5"`, `{"type":"Point","coordinates":[13.4,52.5]}`)), ErrInvalidRadius, 1, "str", "must be a number"},
		{"polygon with a radius", fc(good, feature(`"id":"pr","radius_m":50`, polygonGeom(square))), ErrInvalidRadius, 1, "pr", "Point circles only"},
		{"fractional min_samples", fc(good, feature(`"id":"ms","min_samples":1.5`, polygonGeom(square))), ErrInvalidProperty, 1, "ms", "min_samples"},
		{"negative loiter", fc(good, feature(`"id":"lo","loiter_s":-1`, polygonGeom(square))), ErrInvalidProperty, 1, "lo", "loiter_s"},
		{"negative hysteresis", fc(good, feature(`"id":"hy","hysteresis_m":-1`, polygonGeom(square))), ErrInvalidProperty, 1, "hy", "hysteresis_m"},
		{"name not a string", fc(good, feature(`"id":"nm","name":7`, polygonGeom(square))), ErrInvalidProperty, 1, "nm", "properties.name"},
		{"spans 200° of longitude", fc(good, feature(`"id":"wide"`, polygonGeom(`[[-100,0],[0,0],[100,0],[100,1],[0,1],[-100,1],[-100,0]]`))), ErrTooLarge, 1, "wide", "longitude"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFeatureCollection(tt.doc)
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			if got != nil {
				t.Errorf("returned %d fences with the error; want none", len(got))
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %q is not %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not mention %q", err, tt.message)
			}
			var fe *FenceError
			if tt.index < 0 {
				if errors.As(err, &fe) {
					t.Errorf("whole-document error came as a FenceError: %v", err)
				}
				return
			}
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *FenceError", err)
			}
			if fe.Index != tt.index || fe.ID != tt.id {
				t.Errorf("FenceError names #%d %q, want #%d %q", fe.Index, fe.ID, tt.index, tt.id)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("fence #%d", tt.index)) {
				t.Errorf("error %q does not name the feature index", err)
			}
		})
	}
}

func TestParseReportsEveryBadFeature(t *testing.T) {
	_, err := ParseFeatureCollection(fc(
		good,
		feature(`"id":"a"`, `{"type":"LineString","coordinates":[]}`),
		feature(`"id":"b"`, polygonGeom(`[[13.40,52.50],[13.41,52.51],[13.41,52.50],[13.40,52.51],[13.40,52.50]]`)),
	))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`fence #1 id="a"`, `fence #2 id="b"`, "2 of 3 features invalid"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if !errors.Is(err, ErrUnsupportedGeometry) || !errors.Is(err, ErrSelfIntersecting) {
		t.Errorf("error %q should wrap both sentinels", err)
	}
}

func TestParseFeatureCollectionAccepts(t *testing.T) {
	doc := fc(
		good,
		feature(`"id":"circle","name":"C","radius_m":250.5,"min_samples":3,"min_dwell_s":1.5,"hysteresis_m":20,"loiter_s":600,"silence_timeout_s":3600,"detector":"strict","stroke":"#ff0000"`,
			`{"type":"Point","coordinates":[13.4,52.5,34.0]}`),
		feature(`"id":"multi","name":null`, `{"type":"MultiPolygon","coordinates":[[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.50]]],[[[13.50,52.50],[13.51,52.50],[13.51,52.51],[13.50,52.50]]]]}`),
		// Counter-clockwise and clockwise rings are both accepted (RFC 7946 §3.1.6).
		feature(`"id":"cw"`, polygonGeom(`[[13.40,52.50],[13.40,52.51],[13.41,52.51],[13.41,52.50],[13.40,52.50]]`)),
		// Repeated consecutive positions are harmless.
		feature(`"id":"repeat"`, polygonGeom(`[[13.40,52.50],[13.41,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]`)),
	)
	got, err := ParseFeatureCollection(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("got %d fences, want 5", len(got))
	}
	c := got[1]
	want := &geofencepb.DebounceSettings{MinSamples: 3, MinDwellMs: 1500, HysteresisM: 20, LoiterMs: 600_000, SilenceTimeoutMs: 3_600_000, Detector: "strict"}
	if c.GetFenceId() != "circle" || c.GetName() != "C" || c.GetRadiusM() != 250.5 ||
		string(c.GetGeometryGeojson()) != `{"type":"Point","coordinates":[13.4,52.5]}` ||
		c.GetSettings().String() != want.String() {
		t.Errorf("circle = %v", c)
	}
	if got[0].GetSettings() != nil {
		t.Errorf("fence without settings has %v", got[0].GetSettings())
	}
	f, err := FenceFromProto(c)
	if err != nil {
		t.Fatal(err)
	}
	if f.Settings != (Settings{MinSamples: 3, MinDwell: 1500 * time.Millisecond, HysteresisM: 20, Loiter: 10 * time.Minute, SilenceTimeout: time.Hour, Detector: "strict"}) {
		t.Errorf("settings = %+v", f.Settings)
	}

	empty, err := ParseFeatureCollection(fc())
	if err != nil || len(empty) != 0 {
		t.Errorf("empty collection: %v, %v", empty, err)
	}
}

func TestFenceFromProto(t *testing.T) {
	square := []byte(`{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]]}`)
	tests := []struct {
		name string
		p    *geofencepb.Fence
		want error
	}{
		{"valid", &geofencepb.Fence{FenceId: "a", GeometryGeojson: square}, nil},
		{"nil", nil, ErrMissingID},
		{"empty id", &geofencepb.Fence{GeometryGeojson: square}, ErrMissingID},
		{"invalid UTF-8 id", &geofencepb.Fence{FenceId: "a\xffb", GeometryGeojson: square}, ErrInvalidID},
		{"no geometry", &geofencepb.Fence{FenceId: "a"}, ErrUnsupportedGeometry},
		{"garbage geometry", &geofencepb.Fence{FenceId: "a", GeometryGeojson: []byte("{")}, ErrUnsupportedGeometry},
		{"bow tie", &geofencepb.Fence{FenceId: "a", GeometryGeojson: []byte(`{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.51],[13.41,52.50],[13.40,52.51],[13.40,52.50]]]}`)}, ErrSelfIntersecting},
		{"circle without radius", &geofencepb.Fence{FenceId: "a", GeometryGeojson: []byte(`{"type":"Point","coordinates":[13.4,52.5]}`)}, ErrInvalidRadius},
		{"circle", &geofencepb.Fence{FenceId: "a", GeometryGeojson: []byte(`{"type":"Point","coordinates":[13.4,52.5]}`), RadiusM: 100}, nil},
		{"negative dwell", &geofencepb.Fence{FenceId: "a", GeometryGeojson: square, Settings: &geofencepb.DebounceSettings{MinDwellMs: -1}}, ErrInvalidProperty},
		{"invalid UTF-8 name", &geofencepb.Fence{FenceId: "a", Name: "\xff", GeometryGeojson: square}, ErrInvalidProperty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FenceFromProto(tt.p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err != nil {
				var fe *FenceError
				if !errors.As(err, &fe) || fe.Index != -1 {
					t.Errorf("err %v is not a *FenceError with Index -1", err)
				}
				return
			}
			p, err := f.ToProto()
			if err != nil {
				t.Fatal(err)
			}
			g, err := FenceFromProto(p)
			if err != nil || g.ID != f.ID || g.Bounds() != f.Bounds() || g.RadiusM != f.RadiusM {
				t.Errorf("round trip: %+v, %v", g, err)
			}
		})
	}
}
