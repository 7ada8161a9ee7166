package occupancy_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/hlc"
)

// TestPeekForwardAgreesWithApply drives a table of small records (splits,
// pruning, duplicates, stale and expired triggers) and checks at every hop
// that the scan of the encoded record says "forward, nothing to write" exactly
// when Apply on the decoded record does, with the same part.
func TestPeekForwardAgreesWithApply(t *testing.T) {
	lim := occupancy.Limits{MaxMembers: 4, Horizon: 50 * time.Millisecond, DevicesCap: 3}
	tb := newTable(t, lim)
	rng := rand.New(rand.NewPCG(1, 2))
	peeked, forwards := 0, 0
	var sent []*geofencepb.Trigger
	for i := range 6000 {
		var tr *geofencepb.Trigger
		switch r := rng.IntN(10); {
		case r == 0 && len(sent) > 0: // a re-delivery or a late trigger
			tr = sent[rng.IntN(len(sent))]
		default:
			typ := enter
			if rng.IntN(2) == 0 {
				typ = exit
			}
			tr = trig(fmt.Sprintf("dev-%03d", rng.IntN(300)), "zone-a", typ, hlc.Pack(int64(baseMs+i), 0))
			sent = append(sent, tr)
		}
		for key := tr.FenceId; ; {
			occ := tb.recs[key]
			if occ == nil {
				occ = &geofencepb.Occupancy{FenceId: tr.FenceId}
				tb.recs[key] = occ
			}
			raw, err := proto.Marshal(occ)
			if err != nil {
				t.Fatal(err)
			}
			part, ok := occupancy.PeekForward(key, raw, tr, lim)
			changed, res := occupancy.Apply(occ, tr, lim)
			want := res == occupancy.Forward && !changed
			if ok != want {
				t.Fatalf("trigger %d at %s: peek %v, Apply (%v, %v)", i, key, ok, changed, res)
			}
			if ok {
				peeked++
				if pk := occupancy.PartKey(key, occ, tr.DeviceId); part != pk {
					t.Fatalf("trigger %d at %s: peek part %q, PartKey %q", i, key, part, pk)
				}
			}
			if res != occupancy.Forward {
				break
			}
			forwards++
			key = occupancy.PartKey(key, occ, tr.DeviceId)
		}
	}
	if peeked == 0 || peeked == forwards {
		t.Fatalf("peeked %d of %d forwards: the walk does not exercise both paths", peeked, forwards)
	}
}

// TestPeekForwardCorrupt: bytes the scan accepts decode, and Apply on them
// forwards to the same part without a change; a scan never vouches for a
// record that decoding would reject.
func TestPeekForwardCorrupt(t *testing.T) {
	lim := occupancy.Limits{MaxMembers: 8}
	tb := newTable(t, lim)
	for i := range 40 {
		tb.apply(trig(fmt.Sprintf("dev-%03d", i), "zone-a", enter, hlc.Pack(int64(baseMs+i), 0)))
	}
	raw, err := proto.Marshal(tb.recs["zone-a"])
	if err != nil {
		t.Fatal(err)
	}
	tr := trig("dev-new", "zone-a", enter, hlc.Pack(baseMs+1000, 0))
	if _, ok := occupancy.PeekForward("zone-a", raw, tr, lim); !ok {
		t.Fatal("a full split root does not forward a new device")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	accepted := 0
	for range 20000 {
		b := append([]byte(nil), raw...)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		part, ok := occupancy.PeekForward("zone-a", b, tr, lim)
		if !ok {
			continue
		}
		accepted++
		occ := &geofencepb.Occupancy{}
		if err := proto.Unmarshal(b, occ); err != nil {
			t.Fatalf("scan accepted bytes that do not decode: %v\n%x\n%x", err, raw, b)
		}
		changed, res := occupancy.Apply(occ, tr, lim)
		if res != occupancy.Forward || changed || occupancy.PartKey("zone-a", occ, tr.DeviceId) != part {
			t.Fatalf("scan forwards to %q; Apply on the decoded bytes: (%v, %v) part %q", part, changed, res, occupancy.PartKey("zone-a", occ, tr.DeviceId))
		}
	}
	if accepted == 0 {
		t.Fatal("no corrupted record was accepted: the test checks nothing")
	}
}
