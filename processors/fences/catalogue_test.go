package fences

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paulmach/orb"
)

// randomFences makes n small fences (star-shaped polygons of 100–500 m
// across, every tenth a circle) spread over a square of side spreadM
// metres around (lat0, lon0).
func randomFences(tb testing.TB, rng *rand.Rand, n int, lat0, lon0, spreadM float64) []Fence {
	return randomFencesOpt(tb, rng, n, lat0, lon0, spreadM, 10)
}

// randomFencesOpt: as randomFences, every circleEvery-th fence a circle (0:
// none).
func randomFencesOpt(tb testing.TB, rng *rand.Rand, n int, lat0, lon0, spreadM float64, circleEvery int) []Fence {
	tb.Helper()
	out := make([]Fence, 0, n)
	for i := range n {
		lat := lat0 + (rng.Float64()-0.5)*spreadM/metresPerDegree
		lon := normLon(lon0 + (rng.Float64()-0.5)*spreadM/kx(lat0))
		id := fmt.Sprintf("r-%05d", i)
		if circleEvery > 0 && i%circleEvery == circleEvery-1 {
			f, err := NewCircleFence(id, "", lat, lon, 50+rng.Float64()*200, Settings{})
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, f)
			continue
		}
		k := 5 + rng.IntN(8)
		ring := make(orb.Ring, 0, k+1)
		for j := range k {
			// Increasing angles around the centre keep the ring simple.
			a := (float64(j) + 0.2 + 0.6*rng.Float64()) / float64(k) * 2 * math.Pi
			r := 50 + rng.Float64()*200
			ring = append(ring, orb.Point{normLon(lon + r*math.Cos(a)/kx(lat)), lat + r*math.Sin(a)/metresPerDegree})
		}
		ring = append(ring, ring[0])
		f, err := NewPolygonFence(id, "", orb.Polygon{ring}, Settings{})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func TestNearMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sets := []struct {
		name       string
		fences     []Fence
		lat0, lon0 float64
		spreadM    float64
		points     int
	}{
		{"demo", Demo(), 52.45, 13.40, 40_000, 5000},
		{"random Berlin", randomFences(t, rng, 1000, 52.52, 13.405, 50_000), 52.52, 13.405, 52_000, 1000},
		{"random antimeridian", randomFences(t, rng, 500, -16.5, 180, 20_000), -16.5, 180, 22_000, 1000},
		{"random near the pole", randomFences(t, rng, 200, 89.9, 0, 10_000), 89.9, 0, 10_000, 1000},
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			c := New()
			if err := c.Apply(1, set.fences, nil); err != nil {
				t.Fatal(err)
			}
			snap := c.Snapshot()
			all := snap.All()
			var within, visited int
			for range set.points {
				lat := math.Min(set.lat0+(rng.Float64()-0.5)*set.spreadM/metresPerDegree, 90)
				lon := normLon(set.lon0 + (rng.Float64()-0.5)*set.spreadM/kx(math.Min(math.Abs(set.lat0), 89.95)))
				margin := []float64{0, 25, 150, 1000}[rng.IntN(4)]
				got := map[string]int{}
				snap.Near(lat, lon, margin, func(f *Fence) bool { got[f.ID]++; return true })
				for id, n := range got {
					if n != 1 {
						t.Fatalf("Near(%v, %v, %v) visited %s %d times", lat, lon, margin, id, n)
					}
				}
				visited += len(got)
				for i := range all {
					f := &all[i]
					inBox := f.Bounds().ContainsPoint(lat, lon, margin)
					if _, ok := got[f.ID]; ok != inBox {
						t.Fatalf("Near(%v, %v, %v): visited(%s) = %v, box test says %v", lat, lon, margin, f.ID, ok, inBox)
					}
					if d := f.SignedDistance(lat, lon); d >= -margin {
						within++
						if !inBox {
							t.Fatalf("Near(%v, %v, %v) missed %s at signed distance %v", lat, lon, margin, f.ID, d)
						}
					}
				}
			}
			if within == 0 || visited == 0 {
				t.Fatalf("test never exercised a hit: within=%d visited=%d", within, visited)
			}
			t.Logf("%d points: %d visits, %d fences within margin", set.points, visited, within)
		})
	}
}

func TestNearFarFencesNotVisited(t *testing.T) {
	c := New()
	if err := c.Apply(1, Demo(), nil); err != nil {
		t.Fatal(err)
	}
	snap := c.Snapshot()
	// Brandenburger Tor: the landmark circle, the Tiergarten, the Mitte zone
	// and nearby fences; never BER, 20 km away.
	got := map[string]bool{}
	snap.Near(52.5163, 13.3777, 100, func(f *Fence) bool { got[f.ID] = true; return true })
	for _, want := range []string{"landmark-brandenburger-tor", "park-tiergarten", "zone-mitte-core"} {
		if !got[want] {
			t.Errorf("Near missed %s: %v", want, got)
		}
	}
	if got["airport-ber"] || got["depot-marienfelde"] {
		t.Errorf("Near visited far fences: %v", got)
	}
	// Invalid points visit nothing.
	for _, p := range [][2]float64{{math.NaN(), 13.4}, {52.5, math.Inf(-1)}, {95, 13.4}} {
		snap.Near(p[0], p[1], 100, func(f *Fence) bool { t.Errorf("visited %s for %v", f.ID, p); return true })
	}
	// fn returning false stops the search.
	n := 0
	snap.Near(52.5163, 13.3777, 5000, func(*Fence) bool { n++; return false })
	if n != 1 {
		t.Errorf("Near kept going after fn returned false: %d calls", n)
	}
}

func TestNearAndSignedDistanceDoNotAllocate(t *testing.T) {
	c := New()
	if err := c.Apply(1, append(Demo(), randomFences(t, rand.New(rand.NewPCG(3, 4)), 1000, 52.52, 13.405, 50_000)...), nil); err != nil {
		t.Fatal(err)
	}
	snap := c.Snapshot()
	var sum float64
	var lat, lon float64 = 52.5163, 13.3777
	fn := func(f *Fence) bool { sum += f.SignedDistance(lat, lon); return true }
	allocs := testing.AllocsPerRun(1000, func() {
		lat += 1e-6
		snap.Near(lat, lon, 200, fn)
	})
	if allocs != 0 {
		t.Errorf("Near + SignedDistance allocate %v times per call", allocs)
	}
}

func TestApply(t *testing.T) {
	mk := func(id string, lat float64) Fence {
		f, err := NewCircleFence(id, "name-"+id, lat, 13.4, 100, Settings{HysteresisM: lat - 52})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	c := New()
	if s := c.Snapshot(); s.Version() != 0 || s.Len() != 0 || len(s.All()) != 0 {
		t.Fatalf("new catalogue: version %d, %d fences", s.Version(), s.Len())
	}
	if err := c.Apply(5, []Fence{mk("c", 52.3), mk("a", 52.1), mk("b", 52.2)}, []string{"unknown"}); err != nil {
		t.Fatal(err)
	}
	s5 := c.Snapshot()
	ids := func(s *Snapshot) []string {
		var out []string
		for _, f := range s.All() {
			out = append(out, f.ID)
		}
		return out
	}
	if got := ids(s5); !slices.Equal(got, []string{"a", "b", "c"}) || s5.Version() != 5 || c.Version() != 5 {
		t.Fatalf("after first batch: %v at version %d", got, s5.Version())
	}
	if f, ok := s5.Get("b"); !ok || f.Name != "name-b" || !f.Contains(52.2, 13.4) {
		t.Errorf("Get(b) = %+v, %v", f, ok)
	}
	if _, ok := s5.Get("zzz"); ok {
		t.Error("Get of an unknown id succeeded")
	}
	if !near(s5.MaxHysteresisM(), 0.3, 1e-9) {
		t.Errorf("MaxHysteresisM = %v, want 0.3", s5.MaxHysteresisM())
	}

	// Deletes apply before upserts; the last upsert of an id wins.
	if err := c.Apply(6, []Fence{mk("a", 52.4), mk("d", 52.5), mk("d", 52.6)}, []string{"a", "c"}); err != nil {
		t.Fatal(err)
	}
	s6 := c.Snapshot()
	if got := ids(s6); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Errorf("after second batch: %v", got)
	}
	if f, _ := s6.Get("d"); !f.Contains(52.6, 13.4) {
		t.Error("the last upsert of d did not win")
	}
	// The old snapshot is untouched.
	if got := ids(s5); !slices.Equal(got, []string{"a", "b", "c"}) || s5.Version() != 5 {
		t.Errorf("old snapshot changed: %v at %d", got, s5.Version())
	}

	// A batch with one invalid fence is rejected whole.
	bad := Fence{ID: "bad", Geometry: orb.Polygon{{{13.40, 52.50}, {13.41, 52.51}, {13.41, 52.50}, {13.40, 52.51}, {13.40, 52.50}}}}
	err := c.Apply(7, []Fence{mk("e", 52.7), bad}, []string{"a"})
	var fe *FenceError
	if !errors.Is(err, ErrSelfIntersecting) || !errors.As(err, &fe) || fe.Index != 1 || fe.ID != "bad" {
		t.Errorf("invalid batch: err = %v", err)
	}
	if c.Snapshot() != s6 {
		t.Error("a rejected batch changed the snapshot")
	}
	// Hand-built valid fences are accepted.
	hand := Fence{ID: "hand", Geometry: orb.Polygon{box(52.5, 13.4, 52.51, 13.41)}}
	if err := c.Apply(7, []Fence{hand}, nil); err != nil {
		t.Fatal(err)
	}
	if f, ok := c.Snapshot().Get("hand"); !ok || !f.Contains(52.505, 13.405) {
		t.Error("hand-built fence missing or wrong")
	}
	// Versions never go back; the same version again is allowed.
	if err := c.Apply(6, nil, nil); !errors.Is(err, ErrVersionRegressed) {
		t.Errorf("older version: err = %v", err)
	}
	if err := c.Apply(7, nil, []string{"hand"}); err != nil {
		t.Errorf("same version: err = %v", err)
	}

	// The zero Catalogue works.
	var zero Catalogue
	if zero.Version() != 0 || zero.Snapshot().Len() != 0 {
		t.Error("zero Catalogue is not empty")
	}
	zero.Snapshot().Near(52.5, 13.4, 100, func(*Fence) bool { t.Error("empty catalogue visited a fence"); return true })
	if err := zero.Apply(1, []Fence{mk("z", 52.5)}, nil); err != nil || zero.Snapshot().Len() != 1 {
		t.Errorf("zero Catalogue Apply: %v", err)
	}
}

// TestApplyAtomicForConcurrentReaders: every reader sees one whole version,
// never a mix. Run with -race.
func TestApplyAtomicForConcurrentReaders(t *testing.T) {
	const base, extra, versions = 40, 10, 200
	batch := func(v uint64) ([]Fence, []string) {
		var ups []Fence
		var dels []string
		for i := range base + extra {
			id := fmt.Sprintf("f-%03d", i)
			if i >= base && v%2 == 1 {
				dels = append(dels, id) // odd versions have only the base set
				continue
			}
			f, err := NewCircleFence(id, strconv.FormatUint(v, 10), 52.5, 13.4+float64(i)*0.001, 200, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			ups = append(ups, f)
		}
		return ups, dels
	}
	c := New()
	ups, dels := batch(1)
	if err := c.Apply(1, ups, dels); err != nil {
		t.Fatal(err)
	}
	// Prebuild so the writer only applies.
	batches := make([][]Fence, versions+1)
	deletes := make([][]string, versions+1)
	for v := uint64(2); v <= versions; v++ {
		batches[v], deletes[v] = batch(v)
	}

	var done atomic.Bool
	var wg sync.WaitGroup
	var checks atomic.Int64
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			last := uint64(0)
			for !done.Load() {
				s := c.Snapshot()
				v := s.Version()
				if v < last {
					errs <- fmt.Errorf("version went back from %d to %d", last, v)
					return
				}
				last = v
				want := base
				if v%2 == 0 {
					want = base + extra
				}
				name := strconv.FormatUint(v, 10)
				if s.Len() != want || len(s.All()) != want {
					errs <- fmt.Errorf("version %d has %d fences, want %d", v, s.Len(), want)
					return
				}
				for _, f := range s.All() {
					if f.Name != name {
						errs <- fmt.Errorf("version %d holds %s from version %s", v, f.ID, f.Name)
						return
					}
				}
				seen := 0
				s.Near(52.5, 13.42, 3000, func(f *Fence) bool {
					if f.Name != name {
						errs <- fmt.Errorf("Near in version %d saw %s from version %s", v, f.ID, f.Name)
					}
					seen++
					return true
				})
				if seen != want {
					errs <- fmt.Errorf("Near in version %d saw %d fences, want %d", v, seen, want)
					return
				}
				checks.Add(1)
			}
		})
	}
	for v := uint64(2); v <= versions; v++ {
		if err := c.Apply(v, batches[v], deletes[v]); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c.Version() != versions {
		t.Errorf("final version %d", c.Version())
	}
	t.Logf("%d consistent reads across %d versions", checks.Load(), versions)
}
