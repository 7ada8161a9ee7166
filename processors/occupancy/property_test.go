package occupancy_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
)

// roundTrip is m through its wire form, as between Goka callbacks.
func roundTrip[M proto.Message](t *testing.T, m M, empty M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, empty); err != nil {
		t.Fatal(err)
	}
	return empty
}

// applyAll runs a delivery order through both stages, checking the
// invariants after every trigger. Now and then a record goes through its
// wire form, and changes already sent are sent again — one at random, or a
// partition's last few in order, as occupancy-members does after a crash —
// and must be dropped.
func applyAll(t *testing.T, r *rand.Rand, order []*geofencepb.Trigger, cap int) *world {
	t.Helper()
	w := newWorld(occupancy.Limits{DevicesCap: cap})
	for _, tr := range order {
		if m := w.devices[tr.DeviceId]; m != nil && r.IntN(8) == 0 {
			w.devices[tr.DeviceId] = roundTrip(t, m, &geofencepb.DeviceMembership{})
		}
		if occ := w.fences[tr.FenceId]; occ != nil && r.IntN(8) == 0 {
			w.fences[tr.FenceId] = roundTrip(t, occ, &geofencepb.Occupancy{})
		}
		if _, res := w.apply(tr); res == occupancy.Invalid || res == occupancy.Full {
			t.Fatalf("%s: %v", tr.TriggerId, res)
		}
		if n := len(w.sent); n > 0 && r.IntN(6) == 0 {
			again := []*geofencepb.OccupancyChange{w.sent[r.IntN(n)]}
			if r.IntN(2) == 0 {
				again = w.sent[max(0, n-1-r.IntN(4)):]
			}
			for _, c := range again {
				if res := w.change(proto.Clone(c).(*geofencepb.OccupancyChange)); res != occupancy.Duplicate {
					t.Fatalf("change %v sent again: %v", c, res)
				}
			}
		}
		checkInvariants(t, w)
	}
	return w
}

func compareTruth(t *testing.T, sc *scenario, w *world, what string) {
	t.Helper()
	for f, want := range sc.truth() {
		got := w.inside(f)
		if c := w.occ(f).GetCount(); c != int64(len(want)) || !slices.Equal(got, want) && len(want)+len(got) > 0 {
			t.Fatalf("%s: fence %s: count %d inside %v, ground truth %d %v", what, f, c, got, len(want), want)
		}
	}
}

// TestApplyProperty: for any interleaving that keeps each (device, fence)'s own
// order, with duplicates and replays of earlier triggers and changes sent
// again, the final counts equal the ground truth and never go negative on
// the way. The same holds for orders where EXITs overtake their ENTERs (no
// order at all).
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

// TestApplyConverges: whatever the order, the registers and counts end the
// same, except for the drop counters and totals that depend on order.
func TestApplyConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	sc := genScenario(r, "", 12, 3, 30)
	ref := applyAll(t, r, sc.all, 4)
	for range 50 {
		got := applyAll(t, r, sc.withDuplicatesAndReplays(r, sc.shuffled(r)), 4)
		for f, want := range ref.fences {
			g := got.occ(f)
			if g.GetCount() != want.Count || g.GetCatalogueVersion() != want.CatalogueVersion {
				t.Fatalf("fence %s: got count %d, want %d", f, g.GetCount(), want.Count)
			}
		}
		for dev, want := range ref.devices {
			for _, m := range want.Fences {
				f := m.GetFenceId()
				if gm := got.member(dev, f); gm.GetInside() != m.Inside || gm.GetLastHlc() != m.LastHlc || gm.GetLastType() != m.LastType {
					t.Fatalf("device %s fence %s: got %v want %v", dev, f, gm, m)
				}
			}
		}
	}
}
