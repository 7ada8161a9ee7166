package fences

import (
	_ "embed"
	"slices"
	"sync"
)

//go:embed demo.geojson
var demoGeoJSON []byte

// demoFences parses the bundled file once; a test proves it valid, so a
// failure here is a build defect and Demo returns no fences.
var demoFences = sync.OnceValue(func() []Fence {
	fs, err := ParseFences(demoGeoJSON)
	if err != nil {
		return nil
	}
	return fs
})

// Demo returns the bundled demo fence set: 34 fences around Berlin
// (hospitals and stations as circles, BER airport, parks with lakes as
// holes, depots, a delivery zone), in file order. The slice is the
// caller's; the fences share immutable geometry.
func Demo() []Fence { return slices.Clone(demoFences()) }

// DemoGeoJSON returns the bundled demo fence set as a GeoJSON
// FeatureCollection (a copy).
func DemoGeoJSON() []byte { return slices.Clone(demoGeoJSON) }
