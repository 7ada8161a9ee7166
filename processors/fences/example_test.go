package fences_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fencestream/fencestream/processors/fences"
)

func ExampleParseFeatureCollection() {
	doc := []byte(`{"type": "FeatureCollection", "features": [
	  {"type": "Feature",
	   "properties": {"id": "depot-1", "name": "Depot", "hysteresis_m": 30, "min_dwell_s": 45},
	   "geometry": {"type": "Polygon", "coordinates": [[[13.40, 52.50], [13.41, 52.50], [13.41, 52.51], [13.40, 52.51], [13.40, 52.50]]]}},
	  {"type": "Feature",
	   "properties": {"id": "hospital", "radius_m": 300},
	   "geometry": {"type": "Point", "coordinates": [13.3775, 52.5254]}}
	]}`)
	pbs, err := fences.ParseFeatureCollection(doc)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pbs {
		fmt.Printf("%s radius=%v dwell=%dms %s\n", p.GetFenceId(), p.GetRadiusM(), p.GetSettings().GetMinDwellMs(), p.GetGeometryGeojson()[:24])
	}

	// One bad feature rejects the whole file, naming it.
	bad := []byte(`{"type": "FeatureCollection", "features": [
	  {"type": "Feature", "properties": {"id": "bow-tie"},
	   "geometry": {"type": "Polygon", "coordinates": [[[13.40, 52.50], [13.41, 52.51], [13.41, 52.50], [13.40, 52.51], [13.40, 52.50]]]}}
	]}`)
	pbs, err = fences.ParseFeatureCollection(bad)
	var fe *fences.FenceError
	if errors.As(err, &fe) {
		fmt.Println(len(pbs), fe.Index, fe.ID, errors.Is(err, fences.ErrSelfIntersecting))
		fmt.Println(fe)
	}
	// Output:
	// depot-1 radius=0 dwell=45000ms {"type":"Polygon","coord
	// hospital radius=300 dwell=0ms {"type":"Point","coordin
	// 0 0 bow-tie true
	// fence #0 id="bow-tie": ring 0: edges 0 and 2 intersect: self-intersecting ring
}

func ExampleSnapshot_Near() {
	c := fences.New()
	if err := c.Apply(1, fences.Demo(), nil); err != nil {
		fmt.Println(err)
		return
	}
	snap := c.Snapshot()

	// A ping at the Brandenburger Tor, 20 m accuracy: visit every fence the
	// debouncer must consider, including ones the device is just outside.
	const lat, lon, accuracyM = 52.5163, 13.3780, 20.0
	margin := snap.MaxHysteresisM() + accuracyM
	var lines []string
	snap.Near(lat, lon, margin, func(f *fences.Fence) bool {
		if d := f.SignedDistance(lat, lon); d >= -margin {
			lines = append(lines, fmt.Sprintf("%-27s %7.1f m  inside=%v", f.ID, d, f.Contains(lat, lon)))
		}
		return true
	})
	slices.Sort(lines)
	fmt.Printf("catalogue v%d, margin %.0f m\n", snap.Version(), margin)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// catalogue v1, margin 120 m
	// landmark-brandenburger-tor    129.7 m  inside=true
	// park-tiergarten               -84.9 m  inside=false
	// zone-mitte-core               120.2 m  inside=true
}
