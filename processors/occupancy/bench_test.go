package occupancy_test

import (
	"fmt"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/hlc"
)

// BenchmarkTrigger is the processor's work per trigger at a fence with n
// devices inside: for every record on the trigger's way, decode it, apply the
// trigger, encode it when it changed (Goka does the same around every
// callback), and encode and decode the trigger once per forward (the loop
// topic). record-bytes is the size of the record the last trigger rewrote,
// largest-record-bytes the largest in the table, hops/op the records a
// trigger passed through. A hop past a split record that does not hold the
// device scans it (PeekForward) instead of decoding it, as the processor does. layout=single is one record per
// fence, as before bounded records (no splitting); layout=split the default
// limits (64 members a record); layout=split256 records of 256 members.
//
//	go test -run x -bench Trigger -benchtime 200x ./processors/occupancy/
func BenchmarkTrigger(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		for _, layout := range []string{"single", "split256", "split"} {
			b.Run(fmt.Sprintf("members=%d/layout=%s", n, layout), func(b *testing.B) {
				lim := occupancy.Limits{}
				switch layout {
				case "single":
					lim.MaxMembers = math.MaxInt32
				case "split256":
					lim.MaxMembers = 256
				}
				benchTrigger(b, n, lim)
			})
		}
	}
}

func benchTrigger(b *testing.B, n int, lim occupancy.Limits) {
	tb := newTable(b, lim)
	wall := int64(baseMs)
	for i := range n {
		tb.apply(benchTrig(i, enter, hlc.Pack(wall+int64(i), 0)))
	}
	raw := map[string][]byte{}
	for key, occ := range tb.recs {
		v, err := proto.Marshal(occ)
		if err != nil {
			b.Fatal(err)
		}
		raw[key] = v
	}
	next := wall + int64(n)
	written, hops := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		typ := exit
		if (i/n)%2 == 1 {
			typ = enter
		}
		next++
		tr := benchTrig(i*7919%n, typ, hlc.Pack(next, 0)) // a prime stride: every part of the fence, each device in turn
		for key := tr.FenceId; ; {
			hops++
			if part, ok := occupancy.PeekForward(key, raw[key], tr, tb.lim); ok {
				key, tr = part, loopTrip(b, tr) // the processor's hop past a record that does not hold the device
				continue
			}
			occ := &geofencepb.Occupancy{}
			if err := proto.Unmarshal(raw[key], occ); err != nil {
				b.Fatal(err)
			}
			changed, res := occupancy.Apply(occ, tr, tb.lim)
			if res != occupancy.Forward || changed {
				v, err := proto.Marshal(occ)
				if err != nil {
					b.Fatal(err)
				}
				raw[key], written = v, len(v)
			}
			if res != occupancy.Forward {
				break
			}
			key, tr = occupancy.PartKey(key, occ, tr.DeviceId), loopTrip(b, tr)
		}
	}
	b.StopTimer()
	largest := 0
	for _, v := range raw {
		largest = max(largest, len(v))
	}
	b.ReportMetric(float64(written), "record-bytes")
	b.ReportMetric(float64(largest), "largest-record-bytes")
	b.ReportMetric(float64(hops)/float64(b.N), "hops/op")
}

// loopTrip is a trigger's way through the loop topic: encoded, decoded.
func loopTrip(b *testing.B, tr *geofencepb.Trigger) *geofencepb.Trigger {
	v, err := proto.Marshal(tr)
	if err != nil {
		b.Fatal(err)
	}
	out := &geofencepb.Trigger{}
	if err := proto.Unmarshal(v, out); err != nil {
		b.Fatal(err)
	}
	return out
}

func benchTrig(i int, typ geofencepb.TriggerType, h uint64) *geofencepb.Trigger {
	return trig(fmt.Sprintf("veh-%06d", i), "zone-mitte-core", typ, h)
}
