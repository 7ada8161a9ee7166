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

// BenchmarkTrigger is the processor's work per trigger at a fence that has
// seen n devices: decode the fence's record, apply one trigger, encode it
// (Goka does the same around every callback). record-bytes is the size of
// the record the trigger rewrote.
func BenchmarkTrigger(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			occ := &geofencepb.Occupancy{}
			wall := int64(baseMs)
			for i := range n {
				occupancy.Apply(occ, benchTrig(i, enter, hlc.Pack(wall+int64(i), 0)), occupancy.Limits{MaxMembers: math.MaxInt32})
			}
			raw, err := proto.Marshal(occ)
			if err != nil {
				b.Fatal(err)
			}
			next := wall + int64(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				typ := exit
				if (i/n)%2 == 1 {
					typ = enter
				}
				next++
				st := &geofencepb.Occupancy{}
				if err := proto.Unmarshal(raw, st); err != nil {
					b.Fatal(err)
				}
				occupancy.Apply(st, benchTrig(i%n, typ, hlc.Pack(next, 0)), occupancy.Limits{MaxMembers: math.MaxInt32})
				if raw, err = proto.Marshal(st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw)), "record-bytes")
		})
	}
}

func benchTrig(i int, typ geofencepb.TriggerType, h uint64) *geofencepb.Trigger {
	return trig(fmt.Sprintf("veh-%06d", i), "zone-mitte-core", typ, h)
}
