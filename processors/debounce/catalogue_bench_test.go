package debounce_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
)

// BenchmarkPingCatalogueScale is issue 16's "per-ping cost" against the
// catalogue's size: the debouncer's work for one ping as handlePing does it
// (decode the ping and the device state, validate, Apply against the
// snapshot, the silence timer's fence look-ups, encode the triggers and the
// state), for a fleet of 16,384 devices whose state does not fit in L1/L2,
// with the catalogues of the 34 demo fences, the first 34, 1,000 and
// 100,000 fences of fences.Synthetic (10–60-vertex polygons and circles over
// about Germany). The kit's part (envelope, store, changelog) is not in it:
// it does not depend on the catalogue.
//
// Each device spends its pings at two places drawn as a fleet spends its
// time around the catalogue's fences (half at a fence, a third on the road
// between neighbouring fences, the rest anywhere; as the fences package's
// BenchmarkCatalogueScale), 8 pings 5 s apart at each, with GPS noise of its
// accuracy (5–30 m), so devices enter, stay and leave fences.
func BenchmarkPingCatalogueScale(b *testing.B) {
	all, err := fences.Synthetic(100_000, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fs   []fences.Fence
	}{
		{"fences=34", fences.Demo()},
		{"fences=34-synthetic", all[:34]},
		{"fences=1000", all[:1000]},
		{"fences=100000", all},
	} {
		cat := fences.New()
		if err := cat.Apply(1, tc.fs, nil); err != nil {
			b.Fatal(err)
		}
		snap := cat.Snapshot()
		fl := newFleet(b, rand.New(rand.NewPCG(5, 6)), tc.fs, 16_384)
		b.Run(tc.name, func(b *testing.B) {
			fl.reset()
			defaults := debounce.DefaultSettings()
			pingCodec := codecs.For[geofencepb.Ping]()
			stateCodec := codecs.For[geofencepb.DeviceState]()
			trigCodec := codecs.For[geofencepb.Trigger]()
			runtime.GC()
			b.ReportAllocs()
			triggers, fenceStates := 0, 0
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				// Ping i is the device's (i / devices)-th: device time moves
				// on by 5 s a round, so every ping is fresh for its device.
				d := &fl.devs[i%len(fl.devs)]
				round := i / len(fl.devs)
				key := d.id
				p, err := pingCodec.Unmarshal(fl.pings[(i%len(fl.devs))*fleetTrack+round%fleetTrack])
				if err != nil {
					b.Fatal(err)
				}
				i++
				p.DeviceTimeMs = 1_800_000_000_000 + int64(round)*5000
				if err := debounce.ValidatePing(key, p); err != nil {
					b.Fatal(err)
				}
				if err := debounce.CheckPlausible(p, debounce.DefaultMaxAccuracyM); err != nil {
					b.Fatal(err)
				}
				p.Hlc = debounce.PingHLC(p)
				st := &geofencepb.DeviceState{DeviceId: key}
				if d.state != nil {
					if st, err = stateCodec.Unmarshal(d.state); err != nil {
						b.Fatal(err)
					}
				}
				debounce.Upgrade(st)
				out := debounce.Apply(st, p, snap, defaults)
				for _, t := range out.Triggers {
					if _, err := trigCodec.Marshal(t); err != nil {
						b.Fatal(err)
					}
					triggers++
				}
				fenceStates += len(st.FenceStates)
				silenceTimeout(st, snap, defaults)
				if d.state, err = stateCodec.Marshal(st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(i), "cpu-µs/op")
			b.ReportMetric(float64(triggers)/float64(i), "triggers/ping")
			b.ReportMetric(float64(fenceStates)/float64(i), "fence-states/ping")
		})
	}
}

// silenceTimeout is what armSilence reads per ping besides the state: each
// fence the device has state for, looked up in the snapshot for its timeout.
func silenceTimeout(st *geofencepb.DeviceState, snap *fences.Snapshot, defaults debounce.Settings) time.Duration {
	var timeout time.Duration
	for _, e := range st.FenceStates {
		cfg := defaults
		if f, ok := snap.Get(e.FenceId); ok {
			cfg = debounce.Resolved(defaults, &f)
		}
		if cfg.SilenceTimeout > 0 && (timeout == 0 || cfg.SilenceTimeout < timeout) {
			timeout = cfg.SilenceTimeout
		}
	}
	return timeout
}

// fleetTrack is the pings of one device before its track repeats: 8 at one
// place, 8 at another.
const fleetTrack = 16

type fleetDevice struct {
	id    string
	state []byte // encoded DeviceState, nil before its first ping
}

type pingFleet struct {
	devs  []fleetDevice
	pings [][]byte // device d's track at d*fleetTrack
}

func (fl *pingFleet) reset() {
	for i := range fl.devs {
		fl.devs[i].state = nil
	}
}

// newFleet places n devices' tracks around fs (see BenchmarkPingCatalogueScale).
func newFleet(tb testing.TB, rng *rand.Rand, fs []fences.Fence, n int) *pingFleet {
	tb.Helper()
	place := fleetPlaces(rng, fs)
	codec := codecs.For[geofencepb.Ping]()
	fl := &pingFleet{devs: make([]fleetDevice, n), pings: make([][]byte, n*fleetTrack)}
	for d := range fl.devs {
		id := fmt.Sprintf("veh-%06d", d)
		fl.devs[d].id = id
		var lat, lon float64
		for k := range fleetTrack {
			if k%(fleetTrack/2) == 0 {
				lat, lon = place()
			}
			acc := 5 + rng.Float64()*25
			// Noise of σ = accuracy/1.51 per axis (accuracy is the 68 % circle).
			s := acc / 1.51
			p := &geofencepb.Ping{
				DeviceId:     id,
				Lat:          lat + rng.NormFloat64()*s/111_320,
				Lon:          lon + rng.NormFloat64()*s/(111_320*math.Cos(lat*math.Pi/180)),
				AccuracyM:    math.Round(acc),
				DeviceTimeMs: 1, // set per use
			}
			v, err := codec.Marshal(p)
			if err != nil {
				tb.Fatal(err)
			}
			fl.pings[d*fleetTrack+k] = v
		}
	}
	return fl
}

// fleetPlaces returns a source of places where a fleet spends its time
// around fs, the fences package's fleetPings distribution:
//
//   - 50% at a fence: uniform in a random fence's box grown by 300 m;
//   - 35% on the road: uniform on the straight line from a fence to one of
//     its neighbours (the next fences by position), 20 m either side;
//   - 15% anywhere: uniform over the fences' area grown by 5 km.
func fleetPlaces(rng *rand.Rand, fs []fences.Fence) func() (lat, lon float64) {
	const mpd = 111_320.0
	kx := func(lat float64) float64 { return mpd * math.Cos(lat*math.Pi/180) }
	order := make([]int, len(fs))
	bounds := make([]fences.Bounds, len(fs))
	area := fences.Bounds{South: 90, West: 180, North: -90, East: -180}
	for i := range fs {
		order[i] = i
		bd := fs[i].Bounds()
		bounds[i] = bd
		area.South, area.North = math.Min(area.South, bd.South), math.Max(area.North, bd.North)
		area.West, area.East = math.Min(area.West, bd.West), math.Max(area.East, bd.East)
	}
	centre := func(i int) (float64, float64) {
		bd := bounds[i]
		return (bd.South + bd.North) / 2, (bd.West + bd.East) / 2
	}
	slices.SortFunc(order, func(a, b int) int {
		la, oa := centre(a)
		lb, ob := centre(b)
		return cmp.Or(cmp.Compare(math.Floor(la*10), math.Floor(lb*10)), cmp.Compare(oa, ob))
	})
	pad := 5000 / mpd
	return func() (lat, lon float64) {
		switch r := rng.Float64(); {
		case r < 0.50:
			bd := bounds[rng.IntN(len(bounds))]
			mid := (bd.South + bd.North) / 2
			lat = bd.South - 300/mpd + rng.Float64()*(bd.North-bd.South+600/mpd)
			lon = bd.West - 300/kx(mid) + rng.Float64()*(bd.East-bd.West+600/kx(mid))
		case r < 0.85:
			k := rng.IntN(len(order))
			a, z := order[k], order[min(k+1+rng.IntN(3), len(order)-1)]
			lat0, lon0 := centre(a)
			lat1, lon1 := centre(z)
			t := rng.Float64()
			side := (rng.Float64()*2 - 1) * 20
			lat = lat0 + t*(lat1-lat0) + side/mpd
			lon = lon0 + t*(lon1-lon0) + side/kx(lat0)
		default:
			c := math.Cos(area.North * math.Pi / 180)
			lat = area.South - pad + rng.Float64()*(area.North-area.South+2*pad)
			lon = area.West - pad/c + rng.Float64()*(area.East-area.West+2*pad/c)
		}
		return lat, lon
	}
}

// cpuTime is the process's user+system CPU time so far: on a loaded machine
// CPU per op says more than wall time per op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
