package occupancy_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/hlc"
)

// BenchmarkTrigger is occupancy's record work per trigger at a fence with n
// devices inside, as Goka does it around each callback: decode the device's
// record, apply the trigger, encode it; then decode the fence's record,
// apply the change, encode it. The fence's record does not grow with n (it
// lists at most DevicesCap devices), so neither does the cost. record-bytes
// are the two records the last trigger rewrote.
//
//	go test -run x -bench Trigger -benchtime 2000x ./processors/occupancy/
func BenchmarkTrigger(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("inside=%d", n), func(b *testing.B) {
			lim := occupancy.Limits{}
			w := newWorld(lim)
			const base = int64(baseMs)
			for i := range n {
				w.apply(benchTrig(i, enter, hlc.Pack(base+int64(i), 0)))
			}
			raw := func(m proto.Message) []byte {
				v, err := proto.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				return v
			}
			devices := map[string][]byte{}
			for id, m := range w.devices {
				devices[id] = raw(m)
			}
			fence := raw(w.occ("f"))
			next := base + int64(n)
			var devBytes int
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				d := i % n
				typ := exit
				if (i/n)%2 == 1 {
					typ = enter
				}
				tr := benchTrig(d, typ, hlc.Pack(next+int64(i), 0))
				m := &geofencepb.DeviceMembership{}
				if err := proto.Unmarshal(devices[tr.DeviceId], m); err != nil {
					b.Fatal(err)
				}
				delta, send, res := occupancy.ApplyTrigger(m, tr, lim)
				if res != occupancy.Applied || !send {
					b.Fatalf("%v send=%v", res, send)
				}
				devices[tr.DeviceId] = raw(m)
				devBytes = len(devices[tr.DeviceId])
				occ := &geofencepb.Occupancy{}
				if err := proto.Unmarshal(fence, occ); err != nil {
					b.Fatal(err)
				}
				if res := occupancy.ApplyChange(occ, occupancy.Change(tr, delta, int32(d%24), int64(n+i)), lim); res != occupancy.Applied {
					b.Fatal(res)
				}
				fence = raw(occ)
			}
			b.ReportMetric(float64(devBytes), "device-record-bytes")
			b.ReportMetric(float64(len(fence)), "fence-record-bytes")
		})
	}
}

func benchTrig(i int, typ geofencepb.TriggerType, h uint64) *geofencepb.Trigger {
	return trig(fmt.Sprintf("dev-%07d", i), "f", typ, h)
}
