package fences

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. They arrive wrapped, usually in a [*FenceError]; test for
// them with errors.Is.
var (
	// ErrInvalidJSON: the document is not valid JSON.
	ErrInvalidJSON = errors.New("invalid JSON")
	// ErrNotFeatureCollection: the document is not a GeoJSON FeatureCollection
	// of Features.
	ErrNotFeatureCollection = errors.New("not a GeoJSON FeatureCollection")
	// ErrMissingID: a fence has no id (properties.id in GeoJSON).
	ErrMissingID = errors.New("missing id")
	// ErrInvalidID: the id is not usable as a Kafka key (empty, invalid
	// UTF-8, longer than MaxIDBytes, or not a string).
	ErrInvalidID = errors.New("invalid id")
	// ErrDuplicateID: two fences of one file share an id.
	ErrDuplicateID = errors.New("duplicate id")
	// ErrUnsupportedGeometry: the geometry is neither Polygon, MultiPolygon
	// nor Point (circle), or is missing.
	ErrUnsupportedGeometry = errors.New("unsupported geometry")
	// ErrInvalidCoordinates: a position is NaN, infinite, out of range
	// (lat ∉ [-90, 90], lon ∉ [-180, 180]) or malformed.
	ErrInvalidCoordinates = errors.New("invalid coordinates")
	// ErrTooFewPoints: a ring has fewer than 4 positions (3 distinct
	// vertices plus the closing one), or a polygon has no ring.
	ErrTooFewPoints = errors.New("ring has too few points")
	// ErrUnclosedRing: a ring's last position differs from its first.
	ErrUnclosedRing = errors.New("unclosed ring")
	// ErrSelfIntersecting: a ring's edges cross or touch each other, or two
	// rings of one polygon cross.
	ErrSelfIntersecting = errors.New("self-intersecting ring")
	// ErrInvalidHole: a hole lies outside its polygon's outer ring or inside
	// another hole.
	ErrInvalidHole = errors.New("invalid hole")
	// ErrInvalidRadius: a circle's radius_m is missing, not positive, not
	// finite or too large, or a polygon carries a radius.
	ErrInvalidRadius = errors.New("invalid radius")
	// ErrTooLarge: the fence spans 180° of longitude or more, so the shorter
	// way round its edges is ambiguous.
	ErrTooLarge = errors.New("fence too large")
	// ErrInvalidProperty: a property (name or a debounce setting) has the
	// wrong type or an out-of-range value.
	ErrInvalidProperty = errors.New("invalid property")
	// ErrMetadataTooLarge: a fence's other properties (its metadata) take
	// more than MaxMetadataBytes as JSON.
	ErrMetadataTooLarge = errors.New("fence metadata too large")
	// ErrVersionRegressed: Apply was given a version lower than the
	// catalogue's current one.
	ErrVersionRegressed = errors.New("catalogue version regressed")
)

// FenceError reports the problem of one fence: which one (its position in
// the file or batch, and its id if known) and what is wrong (Err, which wraps
// a sentinel).
type FenceError struct {
	// Index is the fence's position in the FeatureCollection or Apply batch,
	// or -1 when there is no position (a single protobuf fence).
	Index int
	// ID is the fence id, empty if it is missing or unreadable.
	ID  string
	Err error
}

func (e *FenceError) Error() string {
	var b []byte
	b = append(b, "fence"...)
	if e.Index >= 0 {
		b = append(b, " #"...)
		b = strconv.AppendInt(b, int64(e.Index), 10)
	}
	if e.ID != "" {
		b = append(b, " id="...)
		b = strconv.AppendQuote(b, e.ID)
	}
	b = append(b, ": "...)
	b = append(b, e.Err.Error()...)
	return string(b)
}

func (e *FenceError) Unwrap() error { return e.Err }

// errorf wraps a sentinel with detail: "detail: sentinel".
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)
}
