package debounce_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/paulmach/orb"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
)

// benchCatalogue spreads n square fences of 100–500 m over ~50×50 km.
func benchCatalogue(b *testing.B, n int) *fences.Catalogue {
	b.Helper()
	r := rand.New(rand.NewPCG(1, uint64(n)))
	fs := make([]fences.Fence, 0, n)
	for i := range n {
		lat := 52.3 + r.Float64()*0.45
		lon := 13.0 + r.Float64()*0.73
		half := (50 + r.Float64()*200) / 111_320
		halfLon := half / math.Cos(lat*math.Pi/180)
		ring := orb.Ring{{lon - halfLon, lat - half}, {lon + halfLon, lat - half}, {lon + halfLon, lat + half}, {lon - halfLon, lat + half}, {lon - halfLon, lat - half}}
		f, err := fences.NewPolygonFence(fmt.Sprintf("f-%05d", i), "", orb.Polygon{ring}, fences.Settings{})
		if err != nil {
			b.Fatal(err)
		}
		fs = append(fs, f)
	}
	cat := fences.New()
	if err := cat.Apply(1, fs, nil); err != nil {
		b.Fatal(err)
	}
	return cat
}

// BenchmarkPing measures the debouncer's per-ping work as the processor does it:
// decode the ping and the device state, containment against the catalogue, the
// state machines, and encode the state (and any trigger).
func BenchmarkPing(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("fences=%d", n), func(b *testing.B) {
			cat := benchCatalogue(b, n)
			snap := cat.Snapshot()
			pingCodec := codecs.For[geofencepb.Ping]()
			stateCodec := codecs.For[geofencepb.DeviceState]()
			trigCodec := codecs.For[geofencepb.Trigger]()
			const devices = 1024
			r := rand.New(rand.NewPCG(2, 3))
			// Devices wander near fence centres so many pings are near or inside fences.
			all := snap.All()
			type dev struct {
				lat, lon float64
				state    []byte
			}
			devs := make([]dev, devices)
			for i := range devs {
				f := all[r.IntN(len(all))]
				c := f.Bounds()
				devs[i] = dev{lat: (c.South + c.North) / 2, lon: (c.West + c.East) / 2}
				st, _ := stateCodec.Marshal(&geofencepb.DeviceState{DeviceId: fmt.Sprintf("veh-%04d", i)})
				devs[i].state = st
			}
			pings := make([][]byte, 4096)
			for i := range pings {
				d := devs[i%devices]
				p := &geofencepb.Ping{DeviceId: fmt.Sprintf("veh-%04d", i%devices), Lat: d.lat + r.NormFloat64()*0.002, Lon: d.lon + r.NormFloat64()*0.003, AccuracyM: 5, DeviceTimeMs: 1_800_000_000_000 + int64(i)*1000}
				pings[i], _ = pingCodec.Marshal(p)
			}
			defaults := debounce.DefaultSettings()
			b.ReportAllocs()
			b.ResetTimer()
			var hlc uint64
			triggers := 0
			for i := 0; i < b.N; i++ {
				p, err := pingCodec.Unmarshal(pings[i%len(pings)])
				if err != nil {
					b.Fatal(err)
				}
				hlc++
				p.Hlc = hlc
				d := &devs[i%devices]
				st, err := stateCodec.Unmarshal(d.state)
				if err != nil {
					b.Fatal(err)
				}
				out := debounce.Apply(st, p, snap, defaults)
				for _, t := range out.Triggers {
					if _, err := trigCodec.Marshal(t); err != nil {
						b.Fatal(err)
					}
					triggers++
				}
				if d.state, err = stateCodec.Marshal(st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pings/s")
			b.ReportMetric(float64(triggers)/float64(b.N), "triggers/ping")
		})
	}
}
