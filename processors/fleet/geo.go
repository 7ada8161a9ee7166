package fleet

import "math"

// metresPerDegree matches the fences package's equirectangular scale.
const metresPerDegree = 111_320.0

const degToRad = math.Pi / 180

// proj is a local equirectangular projection around an origin: x east and y
// north, in metres. Routes are straight lines in it.
type proj struct{ lat0, lon0, kx float64 }

func newProj(lat, lon float64) proj {
	return proj{lat0: lat, lon0: lon, kx: metresPerDegree * math.Cos(lat*degToRad)}
}

func (p proj) xy(lat, lon float64) (x, y float64) {
	return wrapLon(lon-p.lon0) * p.kx, (lat - p.lat0) * metresPerDegree
}

func (p proj) latLon(x, y float64) (lat, lon float64) {
	return p.lat0 + y/metresPerDegree, wrapLon(p.lon0 + x/p.kx)
}

// wrapLon maps a longitude (or difference) into [-180, 180).
func wrapLon(l float64) float64 {
	if l >= -180 && l < 180 {
		return l
	}
	l = math.Mod(l+180, 360)
	if l < 0 {
		l += 360
	}
	return l - 180
}

// heading is the compass bearing (degrees clockwise from north, [0, 360))
// of the vector (dx east, dy north).
func heading(dx, dy float64) float64 {
	h := math.Atan2(dx, dy) / degToRad
	if h < 0 {
		h += 360
	}
	return h
}

// offsetLatLon moves (lat, lon) by (dx east, dy north) metres, scaled at
// the point's own latitude: how noise is turned into degrees.
func offsetLatLon(lat, lon, dx, dy float64) (float64, float64) {
	return lat + dy/metresPerDegree, wrapLon(lon + dx/(metresPerDegree*math.Cos(lat*degToRad)))
}
