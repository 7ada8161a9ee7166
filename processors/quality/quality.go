package quality

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/paulmach/orb"
	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Config sizes the workloads. Zero fields take the defaults below.
type Config struct {
	// Seed makes every workload reproducible.
	Seed int64
	// Devices is the number of parked devices per parked workload
	// (default 2000; half of them are within 10 m of the edge).
	Devices int
	// Noise lists the GPS noise levels, σ metres per axis (default 2, 5, 10).
	Noise []float64
	// AccuracyRatio lists the reported accuracy as a multiple of σ; each
	// (noise, ratio) pair is one parked workload (default 1 and 0.5: honest
	// in the simulator's convention, and under-reported by half).
	AccuracyRatio []float64
	// Fixes is the number of fixes of a parked device, at 1 Hz (default 100).
	Fixes int
	// MaxDistanceM is the largest true distance of a parked device from the
	// edge (default 20; bands 0–2, 2–5, 5–10, 10–20 m).
	MaxDistanceM float64
	// Moving is the number of devices of the moving fleet (default 60;
	// negative: no moving workload), driving for MovingFor (default 40 min)
	// over the demo fences with σ 5 m.
	Moving    int
	MovingFor time.Duration
}

// ErrInvalidConfig is wrapped by the error Run returns for a bad Config.
var ErrInvalidConfig = errors.New("quality: invalid config")

func (c Config) withDefaults() (Config, error) {
	if c.Devices == 0 {
		c.Devices = 2000
	}
	if len(c.Noise) == 0 {
		c.Noise = []float64{2, 5, 10}
	}
	if len(c.AccuracyRatio) == 0 {
		c.AccuracyRatio = []float64{1, 0.5}
	}
	if c.Fixes == 0 {
		c.Fixes = 100
	}
	if c.MaxDistanceM == 0 {
		c.MaxDistanceM = 20
	}
	if c.Moving == 0 {
		c.Moving = 60
	}
	if c.MovingFor == 0 {
		c.MovingFor = 40 * time.Minute
	}
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case c.Devices < 0 || c.Devices > 1_000_000:
		return bad("devices %d, want 1..1000000", c.Devices)
	case c.Fixes < 1 || c.Fixes > 100_000:
		return bad("fixes %d, want 1..100000", c.Fixes)
	case !(c.MaxDistanceM > 0 && c.MaxDistanceM <= 100):
		return bad("max distance %v m, want (0, 100]", c.MaxDistanceM)
	case c.MovingFor < 0:
		return bad("moving duration %v is negative", c.MovingFor)
	}
	for _, n := range c.Noise {
		if !(n > 0 && n <= 100) {
			return bad("noise %v m, want (0, 100]", n)
		}
	}
	for _, r := range c.AccuracyRatio {
		if !(r > 0 && r <= 10) {
			return bad("accuracy ratio %v, want (0, 10]", r)
		}
	}
	return c, nil
}

// Report is the whole comparison.
type Report struct {
	Seed      int64            `json:"seed"`
	Detectors []string         `json:"detectors"`
	Parked    []ParkedWorkload `json:"parked"`
	Moving    *MovingWorkload  `json:"moving,omitempty"`
}

// ParkedWorkload is the score of every detector on one parked workload.
type ParkedWorkload struct {
	NoiseM    float64 `json:"noise_m"`
	AccuracyM float64 `json:"accuracy_m"`
	Devices   int     `json:"devices"`
	Fixes     int     `json:"fixes"`
	// Bands are the distance bands in report order; Near is every device
	// within 10 m (the workload), All every device.
	Bands  []string                 `json:"bands"`
	Scores map[string]*ParkedScores `json:"scores"` // by detector
}

// ParkedScores are one detector's scores per band and in total.
type ParkedScores struct {
	Bands []Score `json:"bands"`
	Near  Score   `json:"near"`
	All   Score   `json:"all"`
}

// Score counts one group of parked devices.
type Score struct {
	Devices int `json:"devices"`
	Inside  int `json:"inside"` // truly inside: each owes one ENTER
	Correct int `json:"correct"`
	// Entered is inside devices with an ENTER (recall = Entered/Inside).
	Entered int `json:"entered"`
	// FalseEnters counts ENTER triggers of outside devices.
	FalseEnters int `json:"false_enters"`
	// Flapping counts devices with more than one trigger.
	Flapping int `json:"flapping"`
	// SecondEnters counts devices with more than one ENTER.
	SecondEnters int `json:"second_enters"`
	// Triggers counts every ENTER and EXIT.
	Triggers int `json:"triggers"`
	// DelayP50S, DelayP90S and DelayP95S: seconds from the first fix to the first ENTER
	// of the inside devices that were entered (-1: none, or a bound).
	DelayP50S float64 `json:"delay_p50_s"`
	DelayP90S float64 `json:"delay_p90_s"`
	DelayP95S float64 `json:"delay_p95_s"`
	delays    []float64
}

// MovingWorkload is the score of the moving fleet.
type MovingWorkload struct {
	Devices     int                     `json:"devices"`
	NoiseM      float64                 `json:"noise_m"`
	Transitions int                     `json:"transitions"`
	Scores      map[string]*MovingScore `json:"scores"` // by detector
}

// MovingScore is one detector on the moving fleet.
type MovingScore struct {
	Detected int `json:"detected"`
	Missed   int `json:"missed"`
	Spurious int `json:"spurious"`
	// FinalWrong counts (device, fence) pairs whose final state differs from
	// the truth.
	FinalWrong int     `json:"final_wrong"`
	DelayP50S  float64 `json:"delay_p50_s"`
	DelayP95S  float64 `json:"delay_p95_s"`
	DelayMaxS  float64 `json:"delay_max_s"`
}

// Run generates the workloads of cfg and scores every detector on them.
func Run(cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Report{Seed: cfg.Seed, Detectors: Detectors()}
	for _, noise := range cfg.Noise {
		for _, ratio := range cfg.AccuracyRatio {
			w, err := runParked(cfg, noise, noise*ratio)
			if err != nil {
				return nil, err
			}
			r.Parked = append(r.Parked, *w)
		}
	}
	if cfg.Moving > 0 {
		if r.Moving, err = runMoving(cfg); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// bandEdges are the upper bounds of the distance bands, metres.
var bandEdges = []float64{2, 5, 10, 20, 50, 100}

const nearM = 10 // the workload: within 10 m of the edge

func bandNames(maxM float64) []string {
	var names []string
	for _, side := range []string{"inside", "outside"} {
		lo := 0.0
		for _, hi := range bandEdges {
			if lo >= maxM {
				break
			}
			names = append(names, fmt.Sprintf("%s %g-%g m", side, lo, hi))
			lo = hi
		}
	}
	return names
}

func bandOf(inside bool, d, maxM float64) int {
	i := 0
	for i < len(bandEdges)-1 && d >= bandEdges[i] {
		i++
	}
	if !inside {
		i += len(bandNames(maxM)) / 2
	}
	return i
}

// octagon is the parked workload's fence: a regular octagon of circumradius
// 600 m (sides of 460 m) around a point in Berlin, default settings.
func octagon() (fences.Fence, error) {
	const lat0, lon0, r = 52.52, 13.40, 600.0
	var ring orb.Ring
	for k := 0; k <= 8; k++ {
		a := (float64(k%8) + 0.5) * math.Pi / 4
		x, y := r*math.Cos(a), r*math.Sin(a)
		ring = append(ring, orb.Point{lon0 + x/(metresPerDegree*math.Cos(lat0*math.Pi/180)), lat0 + y/metresPerDegree})
	}
	return fences.NewPolygonFence("octagon", "parked workload", orb.Polygon{ring}, fences.Settings{})
}

const metresPerDegree = 111_320.0 // as the fences package and the fleet simulator

// parkedPings draws device i of a parked workload: its true signed distance
// and its fixes.
func parkedPings(cfg Config, f *fences.Fence, i int, noise, acc float64) (truth float64, pings []*geofencepb.Ping) {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)))
	const lat0, lon0, r = 52.52, 13.40, 600.0
	d := rng.Float64() * cfg.MaxDistanceM
	if i%2 == 1 {
		d = -d
	}
	// A point on the middle half of a random side, moved d along the inward
	// normal (towards the centre).
	k := float64(rng.IntN(8))
	a0, a1 := (k+0.5)*math.Pi/4, (k+1.5)*math.Pi/4
	t := 0.25 + 0.5*rng.Float64()
	x := r * (math.Cos(a0) + t*(math.Cos(a1)-math.Cos(a0)))
	y := r * (math.Sin(a0) + t*(math.Sin(a1)-math.Sin(a0)))
	n := math.Hypot(x, y)
	x, y = x-d*x/n, y-d*y/n
	mLon := metresPerDegree * math.Cos(lat0*math.Pi/180)
	lat, lon := lat0+y/metresPerDegree, lon0+x/mLon
	truth = f.SignedDistance(lat, lon)

	noiseRng := rand.New(rand.NewPCG(uint64(cfg.Seed), 1<<40|uint64(i)))
	start := fleet.DefaultStart().UnixMilli()
	id := fmt.Sprintf("park-%06d", i+1)
	pings = make([]*geofencepb.Ping, cfg.Fixes)
	for j := range pings {
		ms := start + int64(j)*1000
		pings[j] = &geofencepb.Ping{
			DeviceId:     id,
			Lat:          lat + noise*noiseRng.NormFloat64()/metresPerDegree,
			Lon:          lon + noise*noiseRng.NormFloat64()/mLon,
			AccuracyM:    acc,
			DeviceTimeMs: ms,
			Hlc:          hlc.Pack(ms, 0),
		}
	}
	return truth, pings
}

func runParked(cfg Config, noise, acc float64) (*ParkedWorkload, error) {
	f, err := octagon()
	if err != nil {
		return nil, fmt.Errorf("quality: parked fence: %w", err)
	}
	cat := fences.New()
	if err := cat.Apply(1, []fences.Fence{f}, nil); err != nil {
		return nil, fmt.Errorf("quality: parked fence: %w", err)
	}
	snap := cat.Snapshot()
	dets := detectorsFor(snap, &f)
	names := bandNames(cfg.MaxDistanceM)
	w := &ParkedWorkload{NoiseM: noise, AccuracyM: acc, Devices: cfg.Devices, Fixes: cfg.Fixes, Bands: names, Scores: map[string]*ParkedScores{}}
	for _, name := range Detectors() {
		w.Scores[name] = &ParkedScores{Bands: make([]Score, len(names))}
	}
	var mu sync.Mutex
	parallel(cfg.Devices, func(i int) {
		truth, pings := parkedPings(cfg, &f, i, noise, acc)
		inside := truth >= 0
		b := bandOf(inside, math.Abs(truth), cfg.MaxDistanceM)
		results := make(map[string]outcome, len(dets))
		for name, d := range dets {
			results[name] = d.run(pings)
		}
		mu.Lock()
		defer mu.Unlock()
		for name, o := range results {
			s := w.Scores[name]
			groups := []*Score{&s.Bands[b], &s.All}
			if math.Abs(truth) < nearM {
				groups = append(groups, &s.Near)
			}
			for _, g := range groups {
				g.add(inside, o, f.ID, pings[0].GetDeviceTimeMs(), name == MeanBound)
			}
		}
	})
	for _, s := range w.Scores {
		for i := range s.Bands {
			s.Bands[i].finish()
		}
		s.Near.finish()
		s.All.finish()
	}
	return w, nil
}

func (g *Score) add(inside bool, o outcome, fence string, startMs int64, bound bool) {
	g.Devices++
	n, enters, firstEnter := 0, 0, int64(-1)
	for _, t := range o.trigs {
		if t.fence != fence {
			continue
		}
		n++
		if t.typ == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
			enters++
			if firstEnter < 0 {
				firstEnter = t.timeMs
			}
		}
	}
	if o.inside[fence] == inside {
		g.Correct++
	}
	if enters > 1 {
		g.SecondEnters++
	}
	g.Triggers += n
	if n > 1 {
		g.Flapping++
	}
	if inside {
		g.Inside++
		if bound && o.inside[fence] {
			g.Entered++ // the bound "enters" what it classifies inside
		}
		if enters > 0 {
			g.Entered++
			g.delays = append(g.delays, float64(firstEnter-startMs)/1000)
		}
	} else {
		g.FalseEnters += enters
		if bound && o.inside[fence] {
			g.FalseEnters++
		}
	}
}

func (g *Score) finish() {
	g.DelayP50S, g.DelayP90S, g.DelayP95S = -1, -1, -1
	if len(g.delays) == 0 {
		return
	}
	slices.Sort(g.delays)
	g.DelayP50S = quantile(g.delays, 0.5)
	g.DelayP90S = quantile(g.delays, 0.9)
	g.DelayP95S = quantile(g.delays, 0.95)
}

// quantile of sorted xs, nearest rank.
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// parallel runs fn(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		g.Go(func() error { fn(i); return nil })
	}
	g.Wait() //nolint:errcheck // fn returns no error
}
