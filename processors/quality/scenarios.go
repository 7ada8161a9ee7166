package quality

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/paulmach/orb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Scenario names, in report order (issue 20: what real phones do).
const (
	ScenarioOutliers   = "outliers"
	ScenarioOptimistic = "optimistic"
	ScenarioPhones     = "outliers+optimistic"
	ScenarioRoad       = "road"
	ScenarioTunnel     = "tunnel"
	ScenarioSparse     = "sparse-parked"
	ScenarioSparseMove = "sparse-moving"
)

// Scenarios lists every scenario name.
func Scenarios() []string {
	return []string{ScenarioOutliers, ScenarioOptimistic, ScenarioPhones, ScenarioRoad, ScenarioTunnel, ScenarioSparse, ScenarioSparseMove}
}

// scenarioNoiseM is every scenario's GPS noise, σ per axis: a phone in the
// open. Outliers are drawn with σ outlierNoiseM instead, reporting the
// normal accuracy.
const (
	scenarioNoiseM = 5.0
	outlierNoiseM  = 60.0
	outlierShare   = 0.05
)

// ScenarioBands are the distance bands false and second ENTERs are counted
// by: the true distance from the edge of a parked device, the road's offset
// of a vehicle; a device that crosses the fence counts as ">10 m". A new
// slice each call: the caller may keep or change it.
func ScenarioBands() []string { return []string{"0-2 m", "2-5 m", "5-10 m", ">10 m"} }

func scenarioBand(d float64) int {
	switch d = math.Abs(d); {
	case d < 2:
		return 0
	case d < 5:
		return 1
	case d < 10:
		return 2
	}
	return 3
}

// ScenarioResult is every detector on one scenario.
type ScenarioResult struct {
	Name        string                    `json:"name"`
	Description string                    `json:"description"`
	Devices     int                       `json:"devices"`
	Scores      map[string]*ScenarioScore `json:"scores"` // by detector
}

// ScenarioScore is one detector on one scenario.
type ScenarioScore struct {
	Devices int `json:"devices"`
	Correct int `json:"correct"` // final state right
	// FalseEnters counts devices truly outside (for the whole trace) with an
	// ENTER, per band; SecondEnters devices with more than one ENTER in one
	// true stay (or any ENTER after a first false one), per band.
	FalseEnters  []int `json:"false_enters"`
	SecondEnters []int `json:"second_enters"`
	// Owed true transitions (ENTER of a device parked inside; ENTER and EXIT
	// of a device crossing the fence) and how many got no trigger.
	Owed   int `json:"owed"`
	Missed int `json:"missed"`
	// Delay from the true ENTER (a parked device's first fix, a crossing
	// device's true crossing) to the ENTER trigger, seconds; -1 none.
	DelayP50S float64 `json:"delay_p50_s"`
	DelayP90S float64 `json:"delay_p90_s"`
	// DelayP90ByBandS is the p90 delay per band (-1: no ENTER there).
	DelayP90ByBandS []float64 `json:"delay_p90_by_band_s"`
	delays          []float64
	bandDelays      [][]float64
}

// scenarioDevice is one device of a scenario: its pings and its truth.
type scenarioDevice struct {
	pings []*geofencepb.Ping
	band  int
	// parked devices: inside or not, for the whole trace; crossing devices:
	// the true ENTER and EXIT times (crossing set).
	inside          bool
	crossing        bool
	enterMs, exitMs int64
}

// RunScenarios scores every detector on the named scenarios (all when
// names is empty), devices each, for one seed.
func RunScenarios(seed int64, devices int, names []string) ([]ScenarioResult, error) {
	if devices < 1 || devices > 1_000_000 {
		return nil, fmt.Errorf("%w: devices %d, want 1..1000000", ErrInvalidConfig, devices)
	}
	if len(names) == 0 {
		names = Scenarios()
	}
	oct, err := octagon()
	if err != nil {
		return nil, fmt.Errorf("quality: parked fence: %w", err)
	}
	sq, err := square()
	if err != nil {
		return nil, fmt.Errorf("quality: road fence: %w", err)
	}
	var out []ScenarioResult
	for _, name := range names {
		var gen func(rng *rand.Rand, noise *rand.Rand, i int) scenarioDevice
		var f fences.Fence
		var desc string
		switch name {
		case ScenarioOutliers:
			f, desc = oct, "parked 0-10 m inside/outside an edge, σ 5 m, accuracy 5 m, 5% of fixes outliers (σ 60 m) reporting 5 m, 100 fixes at 1 Hz"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice {
				return parkedDevice(&oct, rng, noise, i, seed, parkedSpec{acc: 5, outliers: outlierShare, intervalMs: 1000})
			}
		case ScenarioOptimistic:
			f, desc = oct, "parked 0-10 m inside/outside an edge, σ 5 m, accuracy reported 2.5 m (half the truth), 100 fixes at 1 Hz"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice {
				return parkedDevice(&oct, rng, noise, i, seed, parkedSpec{acc: 2.5, intervalMs: 1000})
			}
		case ScenarioPhones:
			f, desc = oct, "both: parked 0-10 m, σ 5 m, accuracy 2.5 m, 5% outliers (σ 60 m), 100 fixes at 1 Hz (issue 20's measurement)"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice {
				return parkedDevice(&oct, rng, noise, i, seed, parkedSpec{acc: 2.5, outliers: outlierShare, intervalMs: 1000})
			}
		case ScenarioSparse:
			f, desc = oct, "parked 0-10 m, σ 5 m, accuracy 5 m, a fix every 30 s, 100 fixes"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice {
				return parkedDevice(&oct, rng, noise, i, seed, parkedSpec{acc: 5, intervalMs: 30_000})
			}
		case ScenarioRoad:
			f, desc = sq, "vehicles on a straight road 3, 5 or 10 m outside a 3 km edge, driving 2 km parallel to it at 10-15 m/s, σ 5 m, accuracy 5 m, 1 Hz"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice { return roadDevice(rng, noise, i) }
		case ScenarioTunnel:
			f, desc = sq, "vehicles driving straight through a 3 km square at 10-15 m/s, one 30-120 s gap without fixes while inside, σ 5 m, accuracy 5 m, 1 Hz"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice { return crossingDevice(rng, noise, i, 1000, true) }
		case ScenarioSparseMove:
			f, desc = sq, "vehicles driving straight through a 3 km square at 10-15 m/s, a fix every 30 s, σ 5 m, accuracy 5 m"
			gen = func(rng, noise *rand.Rand, i int) scenarioDevice { return crossingDevice(rng, noise, i, 30_000, false) }
		default:
			return nil, fmt.Errorf("%w: unknown scenario %q", ErrInvalidConfig, name)
		}
		res, err := runScenario(seed, devices, name, desc, f, gen)
		if err != nil {
			return nil, err
		}
		out = append(out, *res)
	}
	return out, nil
}

func runScenario(seed int64, devices int, name, desc string, f fences.Fence, gen func(rng, noise *rand.Rand, i int) scenarioDevice) (*ScenarioResult, error) {
	cat := fences.New()
	if err := cat.Apply(1, []fences.Fence{f}, nil); err != nil {
		return nil, fmt.Errorf("quality: scenario %s: %w", name, err)
	}
	snap := cat.Snapshot()
	dets := detectorsFor(snap, nil)
	res := &ScenarioResult{Name: name, Description: desc, Devices: devices, Scores: map[string]*ScenarioScore{}}
	var names []string
	for _, d := range Detectors() {
		if _, ok := dets[d]; ok {
			names = append(names, d)
			res.Scores[d] = &ScenarioScore{FalseEnters: make([]int, len(ScenarioBands())), SecondEnters: make([]int, len(ScenarioBands())), bandDelays: make([][]float64, len(ScenarioBands()))}
		}
	}
	var mu sync.Mutex
	parallel(devices, func(i int) {
		rng := rand.New(rand.NewPCG(uint64(seed), 2<<40|uint64(i)))
		noise := rand.New(rand.NewPCG(uint64(seed), 3<<40|uint64(i)))
		dev := gen(rng, noise, i)
		outs := make([]outcome, len(names))
		for k, n := range names {
			outs[k] = dets[n].run(dev.pings)
		}
		mu.Lock()
		defer mu.Unlock()
		for k, n := range names {
			res.Scores[n].add(&dev, outs[k], f.ID)
		}
	})
	for _, s := range res.Scores {
		s.DelayP50S, s.DelayP90S = -1, -1
		if len(s.delays) > 0 {
			slices.Sort(s.delays)
			s.DelayP50S, s.DelayP90S = quantile(s.delays, 0.5), quantile(s.delays, 0.9)
		}
		s.DelayP90ByBandS = make([]float64, len(ScenarioBands()))
		for b, ds := range s.bandDelays {
			s.DelayP90ByBandS[b] = -1
			if len(ds) > 0 {
				slices.Sort(ds)
				s.DelayP90ByBandS[b] = quantile(ds, 0.9)
			}
		}
		s.delays, s.bandDelays = nil, nil
	}
	return res, nil
}

// crossSlackMs: a trigger of a crossing device matches its true transition
// from this long before it (detectors without debouncing fire on a noisy fix).
const crossSlackMs = 30_000

func (s *ScenarioScore) add(d *scenarioDevice, o outcome, fence string) {
	s.Devices++
	var enters, exits []int64
	for _, t := range o.trigs {
		if t.fence != fence {
			continue
		}
		switch t.typ {
		case geofencepb.TriggerType_TRIGGER_TYPE_ENTER:
			enters = append(enters, t.timeMs)
		case geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
			exits = append(exits, t.timeMs)
		}
	}
	endInside := d.inside && !d.crossing
	if o.inside[fence] == endInside {
		s.Correct++
	}
	if len(enters) > 1 {
		s.SecondEnters[d.band]++
	}
	switch {
	case d.crossing:
		s.Owed += 2
		firstEnter := int64(-1)
		for _, t := range enters {
			if t >= d.enterMs-crossSlackMs && t <= d.exitMs+crossSlackMs {
				firstEnter = t
				break
			}
		}
		if firstEnter < 0 {
			s.Missed++
		} else {
			s.delay(d.band, float64(firstEnter-d.enterMs)/1000)
		}
		if !slices.ContainsFunc(exits, func(t int64) bool { return t >= max(d.exitMs-crossSlackMs, firstEnter) }) {
			s.Missed++
		}
	case d.inside:
		s.Owed++
		if len(enters) == 0 {
			s.Missed++
		} else {
			s.delay(d.band, float64(enters[0]-d.pings[0].GetDeviceTimeMs())/1000)
		}
	default:
		if len(enters) > 0 {
			s.FalseEnters[d.band]++
		}
	}
}

func (s *ScenarioScore) delay(band int, secs float64) {
	s.delays = append(s.delays, secs)
	s.bandDelays[band] = append(s.bandDelays[band], secs)
}

type parkedSpec struct {
	acc        float64 // reported accuracy
	outliers   float64 // share of fixes drawn with σ outlierNoiseM
	intervalMs int64
}

const scenarioFixes = 100

// parkedDevice: device i stands at a true distance uniform in 0-10 m inside
// (even i) or outside (odd i) the middle half of a side of the octagon.
func parkedDevice(f *fences.Fence, rng, noise *rand.Rand, i int, seed int64, spec parkedSpec) scenarioDevice {
	truth, lat, lon := edgePoint(f, rng, i, 10)
	mLon := metresPerDegree * math.Cos(lat*math.Pi/180)
	id := fmt.Sprintf("dev-%06d", i+1)
	start := fleet.DefaultStart().UnixMilli()
	pings := make([]*geofencepb.Ping, scenarioFixes)
	for j := range pings {
		sigma := scenarioNoiseM
		if noise.Float64() < spec.outliers {
			sigma = outlierNoiseM
		}
		pings[j] = fix(id, lat+sigma*noise.NormFloat64()/metresPerDegree, lon+sigma*noise.NormFloat64()/mLon, spec.acc, start+int64(j)*spec.intervalMs)
	}
	return scenarioDevice{pings: pings, band: scenarioBand(truth), inside: truth >= 0}
}

// edgePoint is a true position at a distance uniform in 0-maxM, inside for
// even i, on the middle half of a random side of the octagon.
func edgePoint(f *fences.Fence, rng *rand.Rand, i int, maxM float64) (truth, lat, lon float64) {
	const lat0, lon0, r = 52.52, 13.40, 600.0
	d := rng.Float64() * maxM
	if i%2 == 1 {
		d = -d
	}
	k := float64(rng.IntN(8))
	a0, a1 := (k+0.5)*math.Pi/4, (k+1.5)*math.Pi/4
	t := 0.25 + 0.5*rng.Float64()
	x := r * (math.Cos(a0) + t*(math.Cos(a1)-math.Cos(a0)))
	y := r * (math.Sin(a0) + t*(math.Sin(a1)-math.Sin(a0)))
	n := math.Hypot(x, y)
	x, y = x-d*x/n, y-d*y/n
	mLon := metresPerDegree * math.Cos(lat0*math.Pi/180)
	lat, lon = lat0+y/metresPerDegree, lon0+x/mLon
	return f.SignedDistance(lat, lon), lat, lon
}

func fix(id string, lat, lon, acc float64, ms int64) *geofencepb.Ping {
	return &geofencepb.Ping{DeviceId: id, Lat: lat, Lon: lon, AccuracyM: acc, DeviceTimeMs: ms, Hlc: hlc.Pack(ms, 0)}
}

// The road and crossing scenarios' fence: a square of side squareM with its
// south-west corner at (squareLat, squareLon); x east and y north, metres.
const (
	squareLat, squareLon = 52.40, 13.20
	squareM              = 3000.0
)

func square() (fences.Fence, error) {
	var ring orb.Ring
	for _, c := range [][2]float64{{0, 0}, {squareM, 0}, {squareM, squareM}, {0, squareM}, {0, 0}} {
		lat, lon := squareLatLon(c[0], c[1])
		ring = append(ring, orb.Point{lon, lat})
	}
	return fences.NewPolygonFence("square", "road and crossing workload", orb.Polygon{ring}, fences.Settings{})
}

func squareLatLon(x, y float64) (lat, lon float64) {
	return squareLat + y/metresPerDegree, squareLon + x/(metresPerDegree*math.Cos(squareLat*math.Pi/180))
}

// noisyFix is the fix of a device truly at (x, y) of the square's frame.
func noisyFix(id string, noise *rand.Rand, x, y float64, ms int64) *geofencepb.Ping {
	lat, lon := squareLatLon(x+scenarioNoiseM*noise.NormFloat64(), y+scenarioNoiseM*noise.NormFloat64())
	return fix(id, lat, lon, scenarioNoiseM, ms)
}

// roadDevice drives 2 km along the square's south edge, 3, 5 or 10 m
// outside it (by i), at 10-15 m/s, in a random direction.
func roadDevice(rng, noise *rand.Rand, i int) scenarioDevice {
	offset := []float64{3, 5, 10}[i%3]
	v := 10 + 5*rng.Float64()
	dir := 1.0
	if rng.IntN(2) == 1 {
		dir = -1
	}
	id := fmt.Sprintf("road-%06d", i+1)
	start := fleet.DefaultStart().UnixMilli()
	var pings []*geofencepb.Ping
	for j := 0; ; j++ {
		s := v * float64(j)
		if s > 2000 {
			break
		}
		x := squareM/2 - dir*1000 + dir*s
		pings = append(pings, noisyFix(id, noise, x, -offset, start+int64(j)*1000))
	}
	return scenarioDevice{pings: pings, band: scenarioBand(offset)}
}

// crossingDevice drives north straight through the square, from 300 m
// south of it on until it has sent 10 fixes (and at least 2 min) beyond its
// north edge, at 10-15 m/s, with a fix every intervalMs; with tunnel, one gap
// of 30-120 s while at least 300 m inside.
func crossingDevice(rng, noise *rand.Rand, i int, intervalMs int64, tunnel bool) scenarioDevice {
	v := 10 + 5*rng.Float64()
	x := squareM/4 + rng.Float64()*squareM/2
	const before = 300.0
	total := squareM + before + v*max(120, 10*float64(intervalMs)/1000)
	var gapFrom, gapTo float64 = -1, -1 // seconds
	if tunnel {
		gap := 30 + 90*rng.Float64()
		lo, hi := (before+300)/v, (before+squareM-300)/v-gap
		gapFrom = lo + rng.Float64()*(hi-lo)
		gapTo = gapFrom + gap
	}
	id := fmt.Sprintf("cross-%06d", i+1)
	start := fleet.DefaultStart().UnixMilli() + rng.Int64N(intervalMs) // phase of the fixes against the crossing
	var pings []*geofencepb.Ping
	for ms := int64(0); v*float64(ms)/1000 <= total; ms += intervalMs {
		t := float64(ms) / 1000
		if t >= gapFrom && t < gapTo {
			continue
		}
		pings = append(pings, noisyFix(id, noise, x, v*t-before, start+ms))
	}
	return scenarioDevice{
		pings: pings, band: 3, inside: true, crossing: true,
		enterMs: start + int64(1000*before/v), exitMs: start + int64(1000*(before+squareM)/v),
	}
}
