package fences

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// BenchmarkNearAndDistance is the debouncer's per-ping geometry: one Near
// with a 50 m margin (hysteresis + accuracy) and SignedDistance for every
// fence it visits. Fences: small polygons (100–500 m) over 50 × 50 km of
// Berlin. Points: uniform over the area, or within 300 m of a fence (a
// fleet spends its time at fences).
func BenchmarkNearAndDistance(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		fs := randomFencesOpt(b, rng, n, 52.52, 13.405, 50_000, 0)
		c := New()
		if err := c.Apply(1, fs, nil); err != nil {
			b.Fatal(err)
		}
		snap := c.Snapshot()
		uniform := make([][2]float64, 4096)
		atFences := make([][2]float64, 4096)
		for i := range uniform {
			uniform[i] = [2]float64{52.52 + (rng.Float64()-0.5)*50_000/metresPerDegree, 13.405 + (rng.Float64()-0.5)*50_000/kx(52.52)}
			g := fs[rng.IntN(len(fs))].geo
			atFences[i] = [2]float64{g.lat + (rng.Float64()-0.5)*600/metresPerDegree, g.lon + (rng.Float64()-0.5)*600/kx(g.lat)}
		}
		for _, pts := range []struct {
			name string
			pts  [][2]float64
		}{{"uniform", uniform}, {"at-fences", atFences}} {
			b.Run(fmt.Sprintf("fences=%d/points=%s", n, pts.name), func(b *testing.B) {
				var lat, lon, sum float64
				visits, inside := 0, 0
				fn := func(f *Fence) bool {
					d := f.SignedDistance(lat, lon)
					sum += d
					visits++
					if d >= 0 {
						inside++
					}
					return true
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p := pts.pts[i&4095]
					i++
					lat, lon = p[0], p[1]
					snap.Near(lat, lon, 50, fn)
				}
				b.ReportMetric(float64(visits)/float64(i), "visits/op")
				b.ReportMetric(float64(inside)/float64(i), "inside/op")
			})
		}
	}
}

// BenchmarkApply measures catalogue rebuilds: Apply of 10,000 validated
// fences (index build), and the whole path from a GeoJSON file.
func BenchmarkApply(b *testing.B) {
	fs := randomFences(b, rand.New(rand.NewPCG(9, 9)), 10000, 52.52, 13.405, 50_000)
	b.Run("fences=10000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := New().Apply(1, fs, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	doc := featureCollection(b, fs)
	b.Run("geojson/fences=10000", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			parsed, err := ParseFences(doc)
			if err != nil {
				b.Fatal(err)
			}
			if err := New().Apply(1, parsed, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// featureCollection writes fences as a GeoJSON FeatureCollection.
func featureCollection(tb testing.TB, fs []Fence) []byte {
	tb.Helper()
	var sb strings.Builder
	sb.WriteString(`{"type":"FeatureCollection","features":[`)
	for i := range fs {
		if i > 0 {
			sb.WriteByte(',')
		}
		f := &fs[i]
		fmt.Fprintf(&sb, `{"type":"Feature","properties":{"id":%q`, f.ID)
		if f.RadiusM != 0 {
			fmt.Fprintf(&sb, `,"radius_m":%v`, f.RadiusM)
		}
		sb.WriteString(`},"geometry":`)
		sb.Write(AppendGeoJSON(nil, f.Geometry))
		sb.WriteByte('}')
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// TestParseAndApply10000IsFast guards the "catalogue updates are cheap"
// budget: a 10,000-fence file parses, validates and applies well under a
// second (generously bounded, as the race detector slows it ~10×).
func TestParseAndApply10000IsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	fs := randomFences(t, rand.New(rand.NewPCG(9, 9)), 10000, 52.52, 13.405, 50_000)
	doc := featureCollection(t, fs)
	start := time.Now()
	parsed, err := ParseFences(doc)
	if err != nil {
		t.Fatal(err)
	}
	parsedAt := time.Since(start)
	c := New()
	if err := c.Apply(1, parsed, nil); err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	t.Logf("10,000 fences (%d KiB): parse+validate %v, apply %v", len(doc)>>10, parsedAt, total-parsedAt)
	if c.Snapshot().Len() != 10000 {
		t.Fatalf("applied %d fences", c.Snapshot().Len())
	}
	if total > 10*time.Second {
		t.Errorf("parse+apply of 10,000 fences took %v", total)
	}
}
