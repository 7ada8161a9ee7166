package fences

import (
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"

	"github.com/paulmach/orb"
)

// MaxIDBytes is the longest fence id accepted: ids are Kafka keys of the
// fences topic and fence-keyed streams, and share the project's key limit.
const MaxIDBytes = 255

// Limits of a fence's properties. Metadata is copied into every catalogue
// snapshot and every fenceview answer, so it is bounded; a larger one is
// refused, and with it the whole file, like invalid GeoJSON.
const (
	// MaxMetadataBytes bounds Fence.Metadata, the other properties as
	// compact JSON.
	MaxMetadataBytes = 4096
	// MaxLabels bounds the tags, and the groups, of one fence.
	MaxLabels = 64
	// MaxLabelBytes bounds one tag or group.
	MaxLabelBytes = 128
)

// Applies reports whether a device in groups is measured against the
// fence: always for a fence without groups, otherwise when the two share
// a group. Fences without groups pay one length test.
func (f *Fence) Applies(groups []string) bool {
	if len(f.Groups) == 0 {
		return true
	}
	for _, g := range groups {
		for _, h := range f.Groups {
			if g == h {
				return true
			}
		}
	}
	return false
}

// validateLabels checks tags or groups: at most MaxLabels non-empty UTF-8
// strings of at most MaxLabelBytes each.
func validateLabels(what string, ls []string) error {
	if len(ls) > MaxLabels {
		return errorf(ErrInvalidProperty, "%s has %d entries, limit %d", what, len(ls), MaxLabels)
	}
	for _, l := range ls {
		if l == "" || len(l) > MaxLabelBytes || !utf8.ValidString(l) {
			return errorf(ErrInvalidProperty, "%s entry must be 1-%d bytes of UTF-8, got %d bytes", what, MaxLabelBytes, len(l))
		}
	}
	return nil
}

// validateMetadata checks Fence.Metadata: empty, or a JSON object of at
// most MaxMetadataBytes.
func validateMetadata(m []byte) error {
	if len(m) == 0 {
		return nil
	}
	if len(m) > MaxMetadataBytes {
		return errorf(ErrMetadataTooLarge, "metadata (the properties other than id, name, radius_m, tags, groups and the settings) is %d bytes as JSON, limit %d", len(m), MaxMetadataBytes)
	}
	if m[0] != '{' || !json.Valid(m) {
		return errorf(ErrInvalidProperty, "metadata is not a JSON object")
	}
	return nil
}

// Settings overrides the debouncer's defaults for one fence. A zero field
// means "use the default".
type Settings struct {
	// MinSamples is the number of consecutive samples that confirm a
	// transition.
	MinSamples uint32
	// MinDwell is the minimum event time a candidate transition must last.
	MinDwell time.Duration
	// HysteresisM is how far (metres) outside a device must be to exit.
	HysteresisM float64
	// Loiter is the time inside after which DWELL fires.
	Loiter time.Duration
	// SilenceTimeout closes an INSIDE device that has been silent this long.
	SilenceTimeout time.Duration
	// Detector is the debouncer's rule for this fence: "sprt" or "strict"
	// (see debounce.Detector); empty means the debouncer's default.
	Detector string
	// Crossing turns on CROSS triggers for this fence (see
	// debounce.Settings.Crossing); false means the debouncer's default.
	Crossing bool
}

// IsZero reports whether s overrides nothing.
func (s Settings) IsZero() bool { return s == Settings{} }

func (s Settings) validate() error {
	// The names of debounce.Detector; this package cannot import debounce.
	switch s.Detector {
	case "", "sprt", "strict":
	default:
		return errorf(ErrInvalidProperty, "detector %q (want sprt or strict)", s.Detector)
	}
	if !(s.HysteresisM >= 0) || math.IsInf(s.HysteresisM, 0) {
		return errorf(ErrInvalidProperty, "hysteresis_m %v (want a finite value >= 0)", s.HysteresisM)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"min_dwell", s.MinDwell}, {"loiter", s.Loiter}, {"silence_timeout", s.SilenceTimeout}} {
		if d.v < 0 {
			return errorf(ErrInvalidProperty, "%s %v is negative", d.name, d.v)
		}
	}
	return nil
}

// Fence is one catalogue entry. Build it with [ParseFeatureCollection],
// [FenceFromProto], [NewPolygonFence] or [NewCircleFence], which validate it
// and precompute its geometry; after that treat it as immutable (copies
// share the geometry).
type Fence struct {
	ID string
	// geo is nil until validated; see compiled. Next to ID, where a lookup
	// that finds the fence reads it.
	geo  *shape
	Name string
	// Geometry is an orb.Polygon or orb.MultiPolygon (ring 0 of each
	// polygon is the outer ring, the others are holes), or, for a circle,
	// an orb.Point: its centre. Positions are [lon, lat], as in GeoJSON.
	Geometry orb.Geometry
	// RadiusM is the circle's radius in metres; zero for polygons.
	RadiusM  float64
	Settings Settings
	// Tags are GeoJSON properties.tags, carried on the fence's triggers.
	Tags []string
	// Groups are GeoJSON properties.groups: when non-empty, only a device
	// in one of them (see Applies) is measured against the fence.
	Groups []string
	// Metadata is the fence's other GeoJSON properties as a JSON object
	// (nil: none), at most MaxMetadataBytes.
	Metadata []byte

	// Fences are not comparable (== on the geometry slices would panic at
	// run time); compare IDs instead.
	_ [0]func()
}

// NewPolygonFence validates a polygon or multipolygon fence.
func NewPolygonFence(id, name string, g orb.Geometry, s Settings) (Fence, error) {
	switch g.(type) {
	case orb.Polygon, orb.MultiPolygon:
	default:
		return Fence{}, &FenceError{Index: -1, ID: id, Err: errorf(ErrUnsupportedGeometry, "NewPolygonFence needs a Polygon or MultiPolygon, got %T", g)}
	}
	f := Fence{ID: id, Name: name, Geometry: g, Settings: s}
	return f, f.validate(-1)
}

// NewCircleFence validates a circle fence around (lat, lon).
func NewCircleFence(id, name string, lat, lon, radiusM float64, s Settings) (Fence, error) {
	f := Fence{ID: id, Name: name, Geometry: orb.Point{lon, lat}, RadiusM: radiusM, Settings: s}
	return f, f.validate(-1)
}

// validate checks the fence and fills its precomputed shape. Errors are
// *FenceError with the given index.
func (f *Fence) validate(index int) error {
	fail := func(err error) error { return &FenceError{Index: index, ID: f.ID, Err: err} }
	if err := validateID(f.ID); err != nil {
		return fail(err)
	}
	if !utf8.ValidString(f.Name) {
		return fail(errorf(ErrInvalidProperty, "name is not valid UTF-8"))
	}
	if err := f.Settings.validate(); err != nil {
		return fail(err)
	}
	if err := validateLabels("tags", f.Tags); err != nil {
		return fail(err)
	}
	if err := validateLabels("groups", f.Groups); err != nil {
		return fail(err)
	}
	if err := validateMetadata(f.Metadata); err != nil {
		return fail(err)
	}
	geo, err := compile(f.Geometry, f.RadiusM)
	if err != nil {
		return fail(err)
	}
	f.geo = geo
	return nil
}

// validateID applies the project's Kafka key rules to a fence id.
func validateID(id string) error {
	switch {
	case id == "":
		return ErrMissingID
	case !utf8.ValidString(id):
		return errorf(ErrInvalidID, "id is not valid UTF-8")
	case len(id) > MaxIDBytes:
		return errorf(ErrInvalidID, "id is %d bytes, limit %d", len(id), MaxIDBytes)
	}
	return nil
}

// compiled returns the precomputed shape, computing it (without caching,
// so concurrent use stays safe) for a Fence built by hand. nil means the
// fence is invalid.
func (f *Fence) compiled() *shape {
	if f.geo != nil {
		return f.geo
	}
	geo, err := compile(f.Geometry, f.RadiusM)
	if err != nil {
		return nil
	}
	return geo
}

// IsCircle reports whether the fence is a circle (Point + RadiusM).
func (f *Fence) IsCircle() bool {
	_, ok := f.Geometry.(orb.Point)
	return ok
}

// SignedDistance returns the distance in metres from (lat, lon) to the
// fence boundary: positive inside, negative outside (holes are outside),
// and exactly 0 on the boundary (within a micrometre), which counts as
// inside (see Contains). Polygons use an equirectangular projection around
// the point; circles the haversine distance to the centre. A MultiPolygon
// is the union of its polygons: edges two of them share (as when a fence is
// split at the antimeridian) are not boundary; where polygons overlap, the
// distance inside is a lower bound. Longitudes are
// taken modulo 360, so fences crossing the antimeridian work. It returns
// NaN for an invalid point (NaN, or latitude outside [-90, 90]) or an
// invalid hand-built fence, so that every comparison with it is false and
// no transition follows from it.
func (f *Fence) SignedDistance(lat, lon float64) float64 {
	geo := f.compiled()
	if geo == nil {
		return math.NaN()
	}
	return geo.signedDistance(lat, lon)
}

// Contains reports whether (lat, lon) is inside the fence or on its
// boundary: SignedDistance(lat, lon) >= 0.
func (f *Fence) Contains(lat, lon float64) bool {
	return f.SignedDistance(lat, lon) >= 0
}

// Bounds returns the fence's lat/lon box. For a fence that crosses the
// antimeridian West > East.
func (f *Fence) Bounds() Bounds {
	geo := f.compiled()
	if geo == nil {
		return Bounds{}
	}
	return geo.bounds
}

// Bounds is a latitude/longitude box in degrees. As in GeoJSON (RFC 7946
// §5.2), a box that crosses the antimeridian has West > East.
type Bounds struct {
	South, West, North, East float64
}

// CrossesAntimeridian reports whether the box wraps past ±180°.
func (b Bounds) CrossesAntimeridian() bool { return b.West > b.East }

// ContainsPoint reports whether the box, grown by marginM metres on every
// side, contains (lat, lon). It is exactly the test Snapshot.Near applies.
// The growth is generous (it uses 111 km per degree and the cosine of the
// highest latitude involved), so every point within marginM metres of a
// fence passes it.
func (b Bounds) ContainsPoint(lat, lon, marginM float64) bool {
	q, ok := makeQuery(lat, lon, marginM)
	if !ok {
		return false
	}
	ents, n := b.entries()
	for i := 0; i < q.n; i++ {
		for j := 0; j < n; j++ {
			if intersects(q.min[i], q.max[i], ents[j].min, ents[j].max) {
				return true
			}
		}
	}
	return false
}

// rect is an index rectangle, [lon, lat] order.
type rect struct{ min, max [2]float64 }

// entries splits the box at the antimeridian into index rectangles.
func (b Bounds) entries() ([2]rect, int) {
	if b.West <= b.East {
		return [2]rect{{[2]float64{b.West, b.South}, [2]float64{b.East, b.North}}}, 1
	}
	return [2]rect{
		{[2]float64{b.West, b.South}, [2]float64{180, b.North}},
		{[2]float64{-180, b.South}, [2]float64{b.East, b.North}},
	}, 2
}

// intersects is the rectangle test of the index (Near) and ContainsPoint.
func intersects(amin, amax, bmin, bmax [2]float64) bool {
	return !(bmin[0] > amax[0] || bmax[0] < amin[0] || bmin[1] > amax[1] || bmax[1] < amin[1])
}

// query is the search box around a point: one rectangle, or two when it
// wraps past the antimeridian.
type query struct {
	n        int
	min, max [2][2]float64
}

// makeQuery uses the min/max builtins: the same values as math.Min/Max
// (NaN, ±0 and infinities alike) without a call.
func makeQuery(lat, lon, marginM float64) (q query, ok bool) {
	if !(lat >= -90 && lat <= 90) || math.IsNaN(lon) || math.IsInf(lon, 0) {
		return q, false
	}
	if !(marginM > 0) { // negative or NaN margins mean none
		marginM = 0
	}
	lon = normLon(lon)
	dLat := marginM / marginMetresPerDegree
	south, north := max(lat-dLat, -90), min(lat+dLat, 90)
	c := math.Cos(max(math.Abs(south), math.Abs(north)) * degToRad)
	dLon := math.Inf(1)
	if c > 1e-12 {
		dLon = marginM / (marginMetresPerDegree * c)
	}
	if dLon >= 180 {
		q.n = 1
		q.min[0], q.max[0] = [2]float64{-180, south}, [2]float64{180, north}
		return q, true
	}
	west, east := lon-dLon, lon+dLon
	q.min[0], q.max[0] = [2]float64{max(west, -180), south}, [2]float64{min(east, 180), north}
	q.n = 1
	if east > 180 {
		q.min[1], q.max[1] = [2]float64{-180, south}, [2]float64{east - 360, north}
		q.n = 2
	} else if west < -180 {
		q.min[1], q.max[1] = [2]float64{west + 360, south}, [2]float64{180, north}
		q.n = 2
	}
	return q, true
}
