package fences

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// nearIDs is every fence id Near visits, sorted.
func nearIDs(s *Snapshot, lat, lon, margin float64) []string {
	var ids []string
	s.Near(lat, lon, margin, func(f *Fence) bool {
		ids = append(ids, f.ID)
		return true
	})
	slices.Sort(ids)
	return ids
}

// TestIncrementalMatchesRebuild: random upserts (new shapes for held ids,
// new ids) and deletes (held and unknown ids) applied batch by batch to
// 10,000 fences give, after every batch, the same lookups as a catalogue
// built from scratch from the same fences; snapshots taken earlier keep
// answering as they did.
func TestIncrementalMatchesRebuild(t *testing.T) {
	const n, rounds = 10_000, 30
	rng := rand.New(rand.NewPCG(16, 5))
	base, err := Synthetic(n, 1)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]Fence{}
	for i := range base {
		model[base[i].ID] = base[i]
	}
	c := New()
	if err := c.Apply(1, base, nil); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		out := make([]string, 0, len(model))
		for id := range model {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	// Points: near fences (where lookups find something) and uniform.
	a := SyntheticArea()
	points := func() [][3]float64 {
		held := ids()
		pts := make([][3]float64, 0, 600)
		for range 400 {
			f := model[held[rng.IntN(len(held))]]
			b := f.Bounds()
			pts = append(pts, [3]float64{b.South + (rng.Float64()*1.4-0.2)*(b.North-b.South), b.West + (rng.Float64()*1.4-0.2)*(b.East-b.West), rng.Float64() * 800})
		}
		for range 200 {
			pts = append(pts, [3]float64{a.South + rng.Float64()*(a.North-a.South), a.West + rng.Float64()*(a.East-a.West), rng.Float64() * 5000})
		}
		return pts
	}
	type kept struct {
		snap *Snapshot
		pts  [][3]float64
		want [][]string
	}
	var olds []kept
	next := n
	for round := range rounds {
		var ups []Fence
		var dels []string
		held := ids()
		for range 1 + rng.IntN(80) {
			switch k := rng.IntN(10); {
			case k < 4: // move a held fence
				i := 0
				fmt.Sscanf(held[rng.IntN(len(held))], "syn-%d", &i)
				f, err := SyntheticFence(i, uint64(100+round))
				if err != nil {
					t.Fatal(err)
				}
				f.Settings.HysteresisM = float64(rng.IntN(4) * 10)
				ups = append(ups, f)
			case k < 6: // a new fence
				f, err := SyntheticFence(next, 1)
				if err != nil {
					t.Fatal(err)
				}
				next++
				ups = append(ups, f)
			case k < 9: // delete a held fence
				dels = append(dels, held[rng.IntN(len(held))])
			default: // delete an unknown one
				dels = append(dels, fmt.Sprintf("gone-%d", rng.IntN(1000)))
			}
		}
		// A fence alone at the largest hysteresis, deleted the round after:
		// the maximum must come down again.
		switch round % 3 {
		case 0:
			f, err := SyntheticFence(next, 1)
			if err != nil {
				t.Fatal(err)
			}
			next++
			f.Settings.HysteresisM = float64(50 + round)
			ups = append(ups, f)
		case 1:
			for id, f := range model {
				if f.Settings.HysteresisM >= 50 {
					dels = append(dels, id)
				}
			}
		}
		// The model: deletes first, then upserts, the last one winning.
		for _, id := range dels {
			delete(model, id)
		}
		for _, f := range ups {
			model[f.ID] = f
		}
		if err := c.Apply(uint64(2+round), ups, dels); err != nil {
			t.Fatal(err)
		}
		got := c.Snapshot()
		all := make([]Fence, 0, len(model))
		for _, id := range ids() {
			all = append(all, model[id])
		}
		fresh := New()
		if err := fresh.Apply(1, all, nil); err != nil {
			t.Fatal(err)
		}
		want := fresh.Snapshot()
		if got.Len() != want.Len() || got.MaxHysteresisM() != want.MaxHysteresisM() {
			t.Fatalf("round %d: %d fences, max hysteresis %v; rebuild: %d, %v", round, got.Len(), got.MaxHysteresisM(), want.Len(), want.MaxHysteresisM())
		}
		gotAll, wantAll := got.All(), want.All()
		for i := range wantAll {
			if gotAll[i].ID != wantAll[i].ID || gotAll[i].geo != wantAll[i].geo {
				t.Fatalf("round %d: All()[%d] = %s, rebuild has %s", round, i, gotAll[i].ID, wantAll[i].ID)
			}
		}
		for _, id := range dels {
			if _, ok := got.Get(id); ok != (model[id].ID != "") {
				t.Fatalf("round %d: Get(%s) = %v after its delete", round, id, ok)
			}
		}
		pts := points()
		k := kept{snap: got, pts: pts}
		found := 0
		for _, p := range pts {
			g, w := nearIDs(got, p[0], p[1], p[2]), nearIDs(want, p[0], p[1], p[2])
			if !slices.Equal(g, w) {
				t.Fatalf("round %d: Near(%v, %v, %v) = %v, rebuild gives %v", round, p[0], p[1], p[2], g, w)
			}
			found += len(g)
			k.want = append(k.want, g)
		}
		if found == 0 {
			t.Fatalf("round %d: no lookup found a fence; the points test nothing", round)
		}
		if round%10 == 0 {
			olds = append(olds, k)
		}
	}
	for i, k := range olds {
		for j, p := range k.pts {
			if g := nearIDs(k.snap, p[0], p[1], p[2]); !slices.Equal(g, k.want[j]) {
				t.Fatalf("snapshot %d changed after later updates: Near = %v, was %v", i, g, k.want[j])
			}
		}
	}
}

// TestUpdateCopiesLittle: one upsert into 10,000 fences copies one shard of
// the id index and the grid cells it touches (a few dozen allocations), not the
// catalogue (a rebuild allocates per fence); untouched shards are shared
// with the previous snapshot.
func TestUpdateCopiesLittle(t *testing.T) {
	base, err := Synthetic(10_000, 3)
	if err != nil {
		t.Fatal(err)
	}
	c := New()
	if err := c.Apply(1, base, nil); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot()
	moved, err := SyntheticFence(17, 4)
	if err != nil {
		t.Fatal(err)
	}
	v := uint64(1)
	allocs := testing.AllocsPerRun(20, func() {
		v++
		if err := c.Apply(v, []Fence{moved}, []string{"unknown"}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("one upsert into 10,000 fences allocates %v times; want a copied path, not a rebuild", allocs)
	}
	after := c.Snapshot()
	differ := 0
	for i := range before.shards {
		if fmt.Sprintf("%p", before.shards[i]) != fmt.Sprintf("%p", after.shards[i]) {
			differ++
		}
	}
	if differ != 1 {
		t.Errorf("%d id shards differ after one upsert, want 1", differ)
	}
	if f, _ := after.Get(moved.ID); f.geo != moved.geo {
		t.Error("the upsert is not visible")
	}
	if f, _ := before.Get(moved.ID); f.geo == moved.geo {
		t.Error("the upsert changed the earlier snapshot")
	}
	t.Logf("one upsert: %v allocations", allocs)
}
