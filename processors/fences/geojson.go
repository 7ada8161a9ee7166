package fences

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/paulmach/orb"
)

// maxReportedErrors caps how many bad features one error lists.
const maxReportedErrors = 20

// maxSettingSeconds bounds duration settings so they fit a time.Duration
// and an int64 of milliseconds with room to spare (~31 years).
const maxSettingSeconds = 1e9

// ParseFeatureCollection parses a GeoJSON FeatureCollection of fences into
// the protobuf form published on the fences topic. Each Feature needs
// properties.id (a string valid as a Kafka key, unique in the file), may
// have name, radius_m (required > 0 for Point circles, absent for polygons)
// and the debounce settings min_samples, min_dwell_s, hysteresis_m,
// loiter_s, silence_timeout_s, detector ("sprt" or "strict"), crossing
// (true: CROSS triggers, see debounce.Settings.Crossing), tags and
// groups (lists of strings; see Fence); every other property is kept as the
// fence's Metadata, a JSON object of at most MaxMetadataBytes (a larger one
// is an error, ErrMetadataTooLarge). Geometry is
// Polygon, MultiPolygon or Point (circle). The file is accepted whole or
// rejected whole: on error no fence is returned and the error lists every
// bad feature (up to 20) as a *FenceError, joined with errors.Join.
func ParseFeatureCollection(data []byte) ([]*geofencepb.Fence, error) {
	fs, err := ParseFences(data)
	if err != nil {
		return nil, err
	}
	out := make([]*geofencepb.Fence, len(fs))
	for i := range fs {
		p, err := fs[i].ToProto()
		if err != nil { // unreachable for validated fences
			return nil, &FenceError{Index: i, ID: fs[i].ID, Err: err}
		}
		out[i] = p
	}
	return out, nil
}

// ParseFences is ParseFeatureCollection returning validated Fences, ready
// for Catalogue.Apply.
func ParseFences(data []byte) ([]Fence, error) {
	var fc struct {
		Type     string            `json:"type"`
		Features []json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(data, &fc); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("%w at byte %d: %w", ErrInvalidJSON, syn.Offset, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotFeatureCollection, err)
	}
	if fc.Type != "FeatureCollection" {
		return nil, fmt.Errorf("%w: type is %q", ErrNotFeatureCollection, fc.Type)
	}
	fences := make([]Fence, 0, len(fc.Features))
	firstIndex := make(map[string]int, len(fc.Features))
	var errs []error
	bad := 0
	for i, raw := range fc.Features {
		f, err := parseFeature(raw)
		if err == nil {
			err = f.validate(i)
		} else {
			err = &FenceError{Index: i, ID: f.ID, Err: err}
		}
		if err == nil && f.ID != "" {
			if j, dup := firstIndex[f.ID]; dup {
				err = &FenceError{Index: i, ID: f.ID, Err: errorf(ErrDuplicateID, "id already used by fence #%d", j)}
			}
		}
		if f.ID != "" {
			if _, seen := firstIndex[f.ID]; !seen {
				firstIndex[f.ID] = i
			}
		}
		if err != nil {
			if bad++; bad <= maxReportedErrors {
				errs = append(errs, err)
			}
			continue
		}
		fences = append(fences, f)
	}
	if bad > 0 {
		if bad > maxReportedErrors {
			errs = append(errs, fmt.Errorf("... and %d more bad features", bad-maxReportedErrors))
		}
		return nil, fmt.Errorf("fence file rejected, %d of %d features invalid: %w", bad, len(fc.Features), errors.Join(errs...))
	}
	return fences, nil
}

// parseFeature decodes one Feature without validating its geometry. The
// returned Fence carries the id whenever it could be read, for error
// messages.
func parseFeature(raw json.RawMessage) (Fence, error) {
	var feat struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Geometry   json.RawMessage            `json:"geometry"`
	}
	var f Fence
	if err := json.Unmarshal(raw, &feat); err != nil {
		return f, fmt.Errorf("%w: feature: %w", ErrNotFeatureCollection, err)
	}
	props := feat.Properties
	if idRaw, ok := props["id"]; ok && !isNull(idRaw) {
		if err := json.Unmarshal(idRaw, &f.ID); err != nil {
			return f, errorf(ErrInvalidID, "properties.id must be a string, got %s", idRaw)
		}
	}
	if feat.Type != "Feature" {
		return f, fmt.Errorf("%w: member type is %q, want \"Feature\"", ErrNotFeatureCollection, feat.Type)
	}
	if f.ID == "" {
		return f, fmt.Errorf("properties.id: %w", ErrMissingID)
	}
	if err := parseProperties(props, &f); err != nil {
		return f, err
	}
	g, err := parseGeometry(feat.Geometry)
	if err != nil {
		return f, err
	}
	f.Geometry = g
	if _, isCircle := g.(orb.Point); isCircle && f.RadiusM == 0 {
		return f, errorf(ErrInvalidRadius, "a Point fence needs properties.radius_m > 0")
	}
	return f, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// parseProperties reads name, radius_m and the debounce settings.
func parseProperties(props map[string]json.RawMessage, f *Fence) error {
	num := func(key string) (float64, bool, error) {
		raw, ok := props[key]
		if !ok || isNull(raw) {
			return 0, false, nil
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false, errorf(ErrInvalidProperty, "properties.%s must be a number, got %s", key, raw)
		}
		return v, true, nil
	}
	seconds := func(key string) (time.Duration, error) {
		v, ok, err := num(key)
		if err != nil || !ok {
			return 0, err
		}
		if v < 0 || v > maxSettingSeconds {
			return 0, errorf(ErrInvalidProperty, "properties.%s %v out of range [0, %g]", key, v, maxSettingSeconds)
		}
		// Millisecond granularity: what the protobuf form carries.
		return time.Duration(math.Round(v*1000)) * time.Millisecond, nil
	}
	if raw, ok := props["name"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &f.Name); err != nil {
			return errorf(ErrInvalidProperty, "properties.name must be a string, got %s", raw)
		}
	}
	var err error
	if f.RadiusM, _, err = num("radius_m"); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRadius, err)
	}
	if v, ok, err := num("min_samples"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > math.MaxUint32 || v != math.Trunc(v) {
			return errorf(ErrInvalidProperty, "properties.min_samples %v is not an integer in [0, %d]", v, uint32(math.MaxUint32))
		}
		f.Settings.MinSamples = uint32(v)
	}
	if v, ok, err := num("hysteresis_m"); err != nil {
		return err
	} else if ok {
		f.Settings.HysteresisM = v
	}
	if f.Settings.MinDwell, err = seconds("min_dwell_s"); err != nil {
		return err
	}
	if f.Settings.Loiter, err = seconds("loiter_s"); err != nil {
		return err
	}
	if f.Settings.SilenceTimeout, err = seconds("silence_timeout_s"); err != nil {
		return err
	}
	if raw, ok := props["detector"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &f.Settings.Detector); err != nil {
			return errorf(ErrInvalidProperty, "properties.detector must be a string, got %s", raw)
		}
	}
	if raw, ok := props["crossing"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &f.Settings.Crossing); err != nil {
			return errorf(ErrInvalidProperty, "properties.crossing must be true or false, got %s", clipJSON(raw))
		}
	}
	for _, l := range []struct {
		key string
		dst *[]string
	}{{"tags", &f.Tags}, {"groups", &f.Groups}} {
		if raw, ok := props[l.key]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, l.dst); err != nil {
				return errorf(ErrInvalidProperty, "properties.%s must be a list of strings, got %s", l.key, clipJSON(raw))
			}
			if len(*l.dst) == 0 {
				*l.dst = nil
			}
		}
	}
	return parseMetadata(props, f)
}

// knownProperties are the properties a Fence has fields for; the others
// are its Metadata.
var knownProperties = map[string]bool{
	"id": true, "name": true, "radius_m": true, "min_samples": true, "hysteresis_m": true,
	"min_dwell_s": true, "loiter_s": true, "silence_timeout_s": true, "detector": true,
	"tags": true, "groups": true, "crossing": true,
}

// parseMetadata gathers the other properties into f.Metadata as compact
// JSON with sorted keys (encoding/json sorts a map's), so equal properties
// give equal bytes.
func parseMetadata(props map[string]json.RawMessage, f *Fence) error {
	other := make(map[string]json.RawMessage)
	for k, v := range props {
		if !knownProperties[k] {
			other[k] = v
		}
	}
	if len(other) == 0 {
		return nil
	}
	m, err := json.Marshal(other) // compacts each value
	if err != nil {
		return errorf(ErrInvalidProperty, "properties: %v", err)
	}
	f.Metadata = m
	return validateMetadata(m)
}

// clipJSON bounds what an error quotes of a property.
func clipJSON(raw json.RawMessage) string {
	const n = 100
	if len(raw) <= n {
		return string(raw)
	}
	return string(raw[:n]) + "…"
}

func toPoint(pos []float64) (orb.Point, error) {
	if len(pos) < 2 {
		return orb.Point{}, fmt.Errorf("position %v has %d values, want [lon, lat] or [lon, lat, alt]", pos, len(pos))
	}
	return orb.Point{pos[0], pos[1]}, nil
}

func toPolygon(rings [][][]float64) (orb.Polygon, error) {
	p := make(orb.Polygon, len(rings))
	for ri, r := range rings {
		p[ri] = make(orb.Ring, len(r))
		for k, pos := range r {
			pt, err := toPoint(pos)
			if err != nil {
				return nil, fmt.Errorf("ring %d position %d: %w", ri, k, err)
			}
			p[ri][k] = pt
		}
	}
	return p, nil
}

// parseGeometry decodes a GeoJSON geometry object into orb types. Shape
// validation happens later, in compile.
func parseGeometry(raw json.RawMessage) (orb.Geometry, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, errorf(ErrUnsupportedGeometry, "missing geometry")
	}
	var g struct {
		Type        string          `json:"type"`
		Coordinates json.RawMessage `json:"coordinates"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, errorf(ErrUnsupportedGeometry, "geometry is not an object: %v", err)
	}
	bad := func(err error) error { return fmt.Errorf("%w: %s: %w", ErrInvalidCoordinates, g.Type, err) }
	// encoding/json silently decodes null as 0 into a float64; coordinates
	// hold only numbers and brackets, so any "null" in them is a null.
	if bytes.Contains(g.Coordinates, []byte("null")) {
		return nil, bad(errors.New("coordinates contain null"))
	}
	switch g.Type {
	case "Point":
		var pos []float64
		if err := json.Unmarshal(g.Coordinates, &pos); err != nil {
			return nil, bad(err)
		}
		pt, err := toPoint(pos)
		if err != nil {
			return nil, bad(err)
		}
		return pt, nil
	case "Polygon":
		var rings [][][]float64
		if err := json.Unmarshal(g.Coordinates, &rings); err != nil {
			return nil, bad(err)
		}
		p, err := toPolygon(rings)
		if err != nil {
			return nil, bad(err)
		}
		if len(p) == 0 {
			return nil, errorf(ErrTooFewPoints, "Polygon has no ring")
		}
		return p, nil
	case "MultiPolygon":
		var polys [][][][]float64
		if err := json.Unmarshal(g.Coordinates, &polys); err != nil {
			return nil, bad(err)
		}
		mp := make(orb.MultiPolygon, len(polys))
		for i, rings := range polys {
			p, err := toPolygon(rings)
			if err != nil {
				return nil, bad(fmt.Errorf("polygon %d: %w", i, err))
			}
			mp[i] = p
		}
		return mp, nil
	default:
		return nil, errorf(ErrUnsupportedGeometry, "geometry type %q (want Polygon, MultiPolygon, or Point with radius_m)", g.Type)
	}
}

// FenceFromProto validates a fence read from the fences topic, applying the
// same rules as ParseFeatureCollection. Errors are *FenceError with Index -1.
func FenceFromProto(p *geofencepb.Fence) (Fence, error) {
	if p == nil {
		return Fence{}, &FenceError{Index: -1, Err: fmt.Errorf("nil fence: %w", ErrMissingID)}
	}
	f := Fence{ID: p.GetFenceId(), Name: p.GetName(), RadiusM: p.GetRadiusM(), Tags: p.GetTags(), Groups: p.GetGroups(), Metadata: p.GetMetadataJson()}
	if len(f.Metadata) == 0 {
		f.Metadata = nil
	}
	fail := func(err error) (Fence, error) { return Fence{}, &FenceError{Index: -1, ID: f.ID, Err: err} }
	if s := p.GetSettings(); s != nil {
		for _, ms := range []int64{s.GetMinDwellMs(), s.GetLoiterMs(), s.GetSilenceTimeoutMs()} {
			if ms < 0 || ms > maxSettingSeconds*1000 {
				return fail(errorf(ErrInvalidProperty, "settings duration %d ms out of range", ms))
			}
		}
		f.Settings = Settings{
			MinSamples:     s.GetMinSamples(),
			MinDwell:       time.Duration(s.GetMinDwellMs()) * time.Millisecond,
			HysteresisM:    s.GetHysteresisM(),
			Loiter:         time.Duration(s.GetLoiterMs()) * time.Millisecond,
			SilenceTimeout: time.Duration(s.GetSilenceTimeoutMs()) * time.Millisecond,
			Detector:       s.GetDetector(),
			Crossing:       s.GetCrossing(),
		}
	}
	if err := validateID(f.ID); err != nil {
		return fail(err)
	}
	g, ok := parseCanonical(p.GetGeometryGeojson())
	if !ok {
		var err error
		if g, err = parseGeometry(p.GetGeometryGeojson()); err != nil {
			return fail(err)
		}
	}
	f.Geometry = g
	if err := f.validate(-1); err != nil {
		return Fence{}, err
	}
	return f, nil
}

// ToProto returns the fence's protobuf form (GeoJSON geometry, settings in
// milliseconds; nil Settings when none are overridden). It fails only for
// an invalid hand-built Fence.
func (f *Fence) ToProto() (*geofencepb.Fence, error) {
	if f.geo == nil { // hand-built: check it the way Apply would
		g := *f
		if err := g.validate(-1); err != nil {
			return nil, err
		}
	}
	p := &geofencepb.Fence{
		FenceId:         f.ID,
		Name:            f.Name,
		GeometryGeojson: AppendGeoJSON(nil, f.Geometry),
		RadiusM:         f.RadiusM,
		Tags:            f.Tags,
		Groups:          f.Groups,
		MetadataJson:    f.Metadata,
	}
	if !f.Settings.IsZero() {
		p.Settings = &geofencepb.DebounceSettings{
			MinSamples:       f.Settings.MinSamples,
			MinDwellMs:       f.Settings.MinDwell.Milliseconds(),
			HysteresisM:      f.Settings.HysteresisM,
			LoiterMs:         f.Settings.Loiter.Milliseconds(),
			SilenceTimeoutMs: f.Settings.SilenceTimeout.Milliseconds(),
			Detector:         f.Settings.Detector,
			Crossing:         f.Settings.Crossing,
		}
	}
	return p, nil
}

// AppendGeoJSON appends the GeoJSON geometry object of a Point, Polygon or
// MultiPolygon to b (other types append null). Numbers use the shortest
// form that round-trips, so parsing the output gives back the same
// geometry bit for bit.
func AppendGeoJSON(b []byte, g orb.Geometry) []byte {
	pos := func(b []byte, p orb.Point) []byte {
		b = append(b, '[')
		b = strconv.AppendFloat(b, p[0], 'f', -1, 64)
		b = append(b, ',')
		b = strconv.AppendFloat(b, p[1], 'f', -1, 64)
		return append(b, ']')
	}
	poly := func(b []byte, p orb.Polygon) []byte {
		b = append(b, '[')
		for i, r := range p {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for k, pt := range r {
				if k > 0 {
					b = append(b, ',')
				}
				b = pos(b, pt)
			}
			b = append(b, ']')
		}
		return append(b, ']')
	}
	switch g := g.(type) {
	case orb.Point:
		b = append(b, `{"type":"Point","coordinates":`...)
		b = pos(b, g)
	case orb.Polygon:
		b = append(b, `{"type":"Polygon","coordinates":`...)
		b = poly(b, g)
	case orb.MultiPolygon:
		b = append(b, `{"type":"MultiPolygon","coordinates":[`...)
		for i, p := range g {
			if i > 0 {
				b = append(b, ',')
			}
			b = poly(b, p)
		}
		b = append(b, ']')
	default:
		return append(b, "null"...)
	}
	return append(b, '}')
}
