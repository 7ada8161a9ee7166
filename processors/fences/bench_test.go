package fences

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
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
	if testing.Short() || raceEnabled {
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

// cpuTime is the process's user+system CPU time so far: on a loaded
// machine wall time per op says little, CPU per op more.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU per op since start (a cpuTime reading).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// scaleFences is the benchmarks' country-sized catalogue (Synthetic).
const scaleFences = 100_000

// BenchmarkCatalogueScale is issue 16's catalogue at 100,000 fences
// (Synthetic: 10–60-vertex polygons and circles over about Germany):
//
//   - build: one bulk Apply of every validated fence (a start's indexing);
//   - start: decoding the fences topic's records (protobuf, validation)
//     plus that build: what a start costs besides fetching;
//   - update: one fence moved (an upsert of a held id) into the full
//     catalogue, and one delete and re-insert;
//   - index: Near alone (the candidate lookup);
//   - lookup: what the debouncer does per ping in the catalogue: Near with
//     its margin and SignedDistance for each fence visited, at pings placed
//     as a fleet spends its time (fleetPings: half at fences, a third on
//     the road between neighbouring fences, the rest anywhere), for the 34
//     demo fences (mostly circles round Berlin), for the first 34 synthetic
//     fences (the same shapes as the 100,000, so the ratio is the
//     catalogue's size alone) and for the 100,000.
//   - lookup-cold: the same over 262,144 pings instead of 4,096, so that,
//     as for a fleet of many devices, what a ping reads is rarely in a
//     cache from the pings before it.
//
// heap-MB is the live heap the 100,000 fences and their catalogue hold;
// grid-MB the part of it that is the spatial index (cell tables and items).
func BenchmarkCatalogueScale(b *testing.B) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	fs, err := Synthetic(scaleFences, 1)
	if err != nil {
		b.Fatal(err)
	}
	c := New()
	if err := c.Apply(1, fs, nil); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heapMB := float64(m1.HeapAlloc-m0.HeapAlloc) / (1 << 20)
	runtime.KeepAlive(c)

	b.Run("build/fences=100000", func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			if err := New().Apply(1, fs, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
		b.ReportMetric(heapMB, "heap-MB")
		b.ReportMetric(float64(c.Snapshot().idx.memBytes())/(1<<20), "grid-MB")
	})
	b.Run("start/fences=100000", func(b *testing.B) {
		codec := codecs.For[geofencepb.Fence]()
		recs := make([]*kgo.Record, len(fs))
		for i := range fs {
			pb, err := fs[i].ToProto()
			if err != nil {
				b.Fatal(err)
			}
			v, err := codec.Marshal(pb)
			if err != nil {
				b.Fatal(err)
			}
			recs[i] = &kgo.Record{Key: []byte(fs[i].ID), Value: v}
		}
		cpu0 := cpuTime()
		for b.Loop() {
			ds := decodeRecords(recs, codec)
			ups := make([]Fence, len(ds))
			for i, d := range ds {
				if d.err != nil {
					b.Fatal(d.err)
				}
				ups[i] = *d.fence
			}
			if err := New().Apply(1, ups, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
	})
	b.Run("update/fences=100000", func(b *testing.B) {
		moves := make([]Fence, 64)
		for i := range moves {
			if moves[i], err = SyntheticFence(i*1000, 2+uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
		v := c.Version()
		i := 0
		cpu0 := cpuTime()
		for b.Loop() {
			v++
			f := moves[i%len(moves)]
			if i%len(moves) == i/len(moves)%len(moves) {
				f = fs[(i%len(moves))*1000] // sometimes back where it was
			}
			i++
			if err := c.Apply(v, []Fence{f}, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
	})
	b.Run("delete+insert/fences=100000", func(b *testing.B) {
		v := c.Version()
		i := 0
		cpu0 := cpuTime()
		for b.Loop() {
			f := fs[(i*7919)%len(fs)]
			i++
			v++
			if err := c.Apply(v, nil, []string{f.ID}); err != nil {
				b.Fatal(err)
			}
			v++
			if err := c.Apply(v, []Fence{f}, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
	})
	demo := New()
	if err := demo.Apply(1, Demo(), nil); err != nil {
		b.Fatal(err)
	}
	few := New()
	if err := few.Apply(1, fs[:34], nil); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		snap *Snapshot
		fs   []Fence
	}{
		{"fences=34", demo.Snapshot(), Demo()},
		{"fences=34-synthetic", few.Snapshot(), fs[:34]},
		{"fences=100000", c.Snapshot(), fs},
	} {
		pts := fleetPings(rand.New(rand.NewPCG(3, 4)), tc.fs, 4096)
		cold := fleetPings(rand.New(rand.NewPCG(3, 5)), tc.fs, 1<<18)
		for _, mode := range []string{"index", "lookup", "lookup-cold"} {
			geometry := mode != "index"
			pts := pts
			if mode == "lookup-cold" {
				pts = cold
			}
			b.Run(mode+"/"+tc.name, func(b *testing.B) {
				var lat, lon, sum float64
				visits, inside := 0, 0
				fn := func(f *Fence) bool {
					if geometry {
						d := f.SignedDistance(lat, lon)
						sum += d
						if d >= 0 {
							inside++
						}
					}
					visits++
					return true
				}
				runtime.GC()
				b.ReportAllocs()
				i := 0
				cpu0 := cpuTime()
				for b.Loop() {
					p := &pts[i&(len(pts)-1)]
					i++
					lat, lon = p.lat, p.lon
					tc.snap.Near(lat, lon, p.marginM, fn)
				}
				reportCPU(b, cpu0)
				b.ReportMetric(float64(visits)/float64(i), "visits/op")
				if geometry {
					b.ReportMetric(float64(inside)/float64(i), "inside/op")
				}
			})
		}
	}
}

// fleetPing is one benchmark ping: where, and the margin the debouncer
// would pass to Near for it.
type fleetPing struct{ lat, lon, marginM float64 }

// fleetPings places n pings the way a fleet spends its time around fs:
//
//   - 50% at a fence: uniform in a random fence's box grown by 300 m (at
//     depots, customers, stations; inside or just outside);
//   - 35% on the road: uniform on the straight line from a fence to one of
//     its neighbours (the next fences by position), 20 m either side;
//   - 15% anywhere: uniform over the fences' area grown by 5 km.
//
// The margin is the debouncer's: the default hysteresis (25 m) + the ping's
// accuracy (uniform 5–30 m) + 1 m.
func fleetPings(rng *rand.Rand, fs []Fence, n int) []fleetPing {
	// Neighbours: fences sorted by a coarse row-major position (0.1°
	// cells), so i±1..3 are mostly near each other.
	order := make([]int, len(fs))
	area := Bounds{South: 90, West: 180, North: -90, East: -180}
	for i := range fs {
		order[i] = i
		b := fs[i].Bounds()
		area.South, area.North = math.Min(area.South, b.South), math.Max(area.North, b.North)
		area.West, area.East = math.Min(area.West, b.West), math.Max(area.East, b.East)
	}
	centre := func(i int) (float64, float64) {
		b := fs[i].Bounds()
		return (b.South + b.North) / 2, (b.West + b.East) / 2
	}
	slices.SortFunc(order, func(a, b int) int {
		la, oa := centre(a)
		lb, ob := centre(b)
		return cmp.Or(cmp.Compare(math.Floor(la*10), math.Floor(lb*10)), cmp.Compare(oa, ob))
	})
	pad := 5000 / metresPerDegree
	pts := make([]fleetPing, n)
	for i := range pts {
		var lat, lon float64
		switch r := rng.Float64(); {
		case r < 0.50:
			bd := fs[rng.IntN(len(fs))].Bounds()
			mid := (bd.South + bd.North) / 2
			lat = bd.South - 300/metresPerDegree + rng.Float64()*(bd.North-bd.South+600/metresPerDegree)
			lon = bd.West - 300/kx(mid) + rng.Float64()*(bd.East-bd.West+600/kx(mid))
		case r < 0.85:
			k := rng.IntN(len(order))
			a, z := order[k], order[min(k+1+rng.IntN(3), len(order)-1)]
			lat0, lon0 := centre(a)
			lat1, lon1 := centre(z)
			t := rng.Float64()
			side := (rng.Float64()*2 - 1) * 20
			lat = lat0 + t*(lat1-lat0) + side/metresPerDegree
			lon = lon0 + t*(lon1-lon0) + side/kx(lat0)
		default:
			lat = area.South - pad + rng.Float64()*(area.North-area.South+2*pad)
			lon = area.West - pad/math.Cos(area.North*degToRad) + rng.Float64()*(area.East-area.West+2*pad/math.Cos(area.North*degToRad))
		}
		pts[i] = fleetPing{lat: lat, lon: lon, marginM: 25 + 5 + rng.Float64()*25 + 1}
	}
	return pts
}
