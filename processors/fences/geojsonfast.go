package fences

import (
	"strconv"

	"github.com/paulmach/orb"
)

// parseCanonical decodes a geometry written by AppendGeoJSON (the form
// ToProto puts on the fences topic) without encoding/json, which was half
// of a start's CPU at 100,000 fences. It accepts only that exact form: no
// whitespace, "type" before "coordinates", numbers as strconv's 'f' format
// writes them, no empty arrays, positions of two numbers. For anything
// else ok is false and parseGeometry decodes it the general way; for what
// it accepts, the result is the one parseGeometry would return.
func parseCanonical(raw []byte) (g orb.Geometry, ok bool) {
	p := canonParser{b: raw}
	switch {
	case p.lit(`{"type":"Point","coordinates":`):
		pt, ok := p.point()
		if !ok || !p.lit("}") || p.i != len(p.b) {
			return nil, false
		}
		return pt, true
	case p.lit(`{"type":"Polygon","coordinates":`):
		poly, ok := p.polygon()
		if !ok || !p.lit("}") || p.i != len(p.b) {
			return nil, false
		}
		return poly, true
	case p.lit(`{"type":"MultiPolygon","coordinates":[`):
		var mp orb.MultiPolygon
		for {
			poly, ok := p.polygon()
			if !ok {
				return nil, false
			}
			mp = append(mp, poly)
			if p.lit(",") {
				continue
			}
			if !p.lit("]}") || p.i != len(p.b) {
				return nil, false
			}
			return mp, true
		}
	}
	return nil, false
}

type canonParser struct {
	b []byte
	i int
}

// lit consumes s if the input continues with it.
func (p *canonParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

func (p *canonParser) polygon() (orb.Polygon, bool) {
	if !p.lit("[") {
		return nil, false
	}
	var poly orb.Polygon
	for {
		if !p.lit("[") {
			return nil, false
		}
		var ring orb.Ring
		for {
			pt, ok := p.point()
			if !ok {
				return nil, false
			}
			ring = append(ring, pt)
			if !p.lit(",") {
				break
			}
		}
		if !p.lit("]") {
			return nil, false
		}
		poly = append(poly, ring)
		if !p.lit(",") {
			break
		}
	}
	return poly, p.lit("]")
}

func (p *canonParser) point() (orb.Point, bool) {
	if !p.lit("[") {
		return orb.Point{}, false
	}
	lon, ok := p.number()
	if !ok || !p.lit(",") {
		return orb.Point{}, false
	}
	lat, ok := p.number()
	if !ok || !p.lit("]") {
		return orb.Point{}, false
	}
	return orb.Point{lon, lat}, true
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?, a subset of JSON's grammar on
// which strconv.ParseFloat and encoding/json agree.
func (p *canonParser) number() (float64, bool) {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	n := digits()
	if n == 0 || n > 1 && p.b[intStart] == '0' {
		return 0, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	return v, err == nil
}
