package occupancy_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
)

// applyAll runs a delivery order through Apply, one Occupancy per fence,
// checking the invariants after every trigger. Now and then the state goes
// through its wire form, as it does between Goka callbacks.
func applyAll(t *testing.T, r *rand.Rand, order []*geofencepb.Trigger, cap int) map[string]*geofencepb.Occupancy {
	t.Helper()
	occs := map[string]*geofencepb.Occupancy{}
	for _, tr := range order {
		occ := occs[tr.FenceId]
		if occ == nil {
			occ = &geofencepb.Occupancy{}
		} else if r.IntN(8) == 0 {
			b, err := proto.Marshal(occ)
			if err != nil {
				t.Fatal(err)
			}
			occ = &geofencepb.Occupancy{}
			if err := proto.Unmarshal(b, occ); err != nil {
				t.Fatal(err)
			}
		}
		if _, res := occupancy.Apply(occ, tr, occupancy.Limits{DevicesCap: cap}); res == occupancy.Invalid {
			t.Fatalf("%s: invalid", tr.TriggerId)
		}
		checkInvariants(t, occ, cap)
		occs[tr.FenceId] = occ
	}
	return occs
}

func compareTruth(t *testing.T, sc *scenario, occs map[string]*geofencepb.Occupancy, what string) {
	t.Helper()
	for f, want := range sc.truth() {
		occ := occs[f]
		var got []string
		for dev, m := range occ.GetMembers() {
			if m.GetInside() {
				got = append(got, dev)
			}
		}
		slices.Sort(got)
		if occ.GetCount() != int64(len(want)) || !slices.Equal(got, want) && len(want)+len(got) > 0 {
			t.Fatalf("%s: fence %s: count %d inside %v, ground truth %d %v", what, f, occ.GetCount(), got, len(want), want)
		}
	}
}

// TestApplyProperty: for any interleaving that keeps each (device, fence)'s own
// order, with duplicates and replays of earlier triggers, the final counts equal
// the ground truth and never go negative on the way. The same holds for orders
// where EXITs overtake their ENTERs (no order at all).
func TestApplyProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 42))
	scenarios, orders := 100, 6
	if testing.Short() {
		scenarios = 30
	}
	for range scenarios {
		sc := genScenario(r, "", 2+r.IntN(14), 1+r.IntN(5), 24)
		cap := 1 + r.IntN(6)
		// Every trigger applied exactly once, in the devices' own order.
		compareTruth(t, sc, applyAll(t, r, sc.all, cap), "device order")
		for range orders {
			compareTruth(t, sc, applyAll(t, r, sc.withDuplicatesAndReplays(r, sc.pairOrder(r)), cap), "per-pair order with duplicates and replays")
			compareTruth(t, sc, applyAll(t, r, sc.withDuplicatesAndReplays(r, sc.shuffled(r)), cap), "shuffled with duplicates and replays")
		}
	}
}

// TestApplyConverges: whatever the order, the whole state (not just the count)
// ends the same, except for the drop counters and totals that depend on order.
func TestApplyConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	sc := genScenario(r, "", 12, 3, 30)
	ref := applyAll(t, r, sc.all, 4)
	for range 50 {
		got := applyAll(t, r, sc.withDuplicatesAndReplays(r, sc.shuffled(r)), 4)
		for f, want := range ref {
			g := got[f]
			if g.Count != want.Count || !slices.Equal(g.Devices, want.Devices) || g.CatalogueVersion != want.CatalogueVersion {
				t.Fatalf("fence %s: got count %d devices %v, want %d %v", f, g.Count, g.Devices, want.Count, want.Devices)
			}
			for dev, m := range want.Members {
				if gm := g.Members[dev]; gm.GetInside() != m.Inside || gm.GetLastHlc() != m.LastHlc || gm.GetLastTriggerId() != m.LastTriggerId {
					t.Fatalf("fence %s device %s: got %v want %v", f, dev, gm, m)
				}
			}
		}
	}
}
