package quality

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"text/tabwriter"

	"github.com/paulmach/orb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/topology/hlc"
)

// ScenarioCrossings is the sparse-fix crossing scenario (issue 30): scored
// by [RunCrossings], not [RunScenarios], because its triggers are CROSS.
const ScenarioCrossings = "crossings"

// CrossingChordBands are the bands true crossings are counted by: how far
// the true path between the two fixes runs inside the fence. A new slice
// each call.
func CrossingChordBands() []string { return []string{"<20 m", "20-50 m", "50-100 m", ">=100 m"} }

func chordBand(m float64) int {
	switch {
	case m < 20:
		return 0
	case m < 50:
		return 1
	case m < 100:
		return 2
	}
	return 3
}

// CrossingResult scores the debouncer's CROSS triggers (default settings,
// crossing on for every fence) on the sparse-fix scenario.
type CrossingResult struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Devices     int    `json:"devices"`
	// True crossings: a pair of consecutive fixes whose true positions are
	// both outside the fence while the true path between them runs through
	// it. Found: such a pair got a CROSS; False: a CROSS at a pair whose
	// true path did not touch the fence.
	TrueCrossings int   `json:"true_crossings"`
	Found         int   `json:"found"`
	False         int   `json:"false"`
	TrueByChord   []int `json:"true_by_chord"`
	FoundByChord  []int `json:"found_by_chord"`
	// SeenInside: true crossings where a noisy fix fell inside the fence, so
	// no CROSS is owed by the rule (ENTER/EXIT's business); counted in
	// TrueCrossings and not in Found.
	SeenInside int `json:"seen_inside"`
	// TrueFixInside: a CROSS where the path did run through the fence but a
	// true fix was (just) inside while its noisy fix was outside: not a
	// true crossing by the definition, not false either.
	TrueFixInside int `json:"true_fix_inside"`
	// Error of the CROSS's estimated time against the true path's middle
	// of the fence, seconds, over found crossings.
	TimeErrP50S float64 `json:"time_err_p50_s"`
	TimeErrP90S float64 `json:"time_err_p90_s"`
	timeErrs    []float64
}

// crossingFence: the fence of device i, alone in a cell 11 km by 10 km.
func crossingFence(i int, rng *rand.Rand) (fences.Fence, error) {
	lat, lon := 52+float64(i/100)*0.1, 13+float64(i%100)*0.15
	across := 50 + 250*rng.Float64()
	s := fences.Settings{Crossing: true}
	id := fmt.Sprintf("f%06d", i)
	if i%2 == 0 {
		return fences.NewCircleFence(id, "", lat, lon, across/2, s)
	}
	h, w := across/2/metresPerDegree, across/2/(metresPerDegree*math.Cos(lat*math.Pi/180))
	ring := orb.Ring{{lon - w, lat - h}, {lon + w, lat - h}, {lon + w, lat + h}, {lon - w, lat + h}, {lon - w, lat - h}}
	return fences.NewPolygonFence(id, "", orb.Polygon{ring}, s)
}

// RunCrossings runs the sparse-fix scenario: each device drives a straight
// line at 10-30 m/s, at a random heading and a random offset, past its own
// fence (a circle or a square, 50-300 m across, crossing on) with a fix
// every 30-60 s (σ 5 m per axis, accuracy 5 m), from 2.5 km before the
// fence to 2.5 km after it.
func RunCrossings(seed int64, devices int) (CrossingResult, error) {
	if devices < 1 || devices > 1_000_000 {
		return CrossingResult{}, fmt.Errorf("%w: devices %d, want 1..1000000", ErrInvalidConfig, devices)
	}
	res := CrossingResult{
		Name:        ScenarioCrossings,
		Description: "straight drives at 10-30 m/s past a circle or square 50-300 m across, a fix every 30-60 s, σ 5 m, accuracy 5 m; debouncer defaults, crossing on",
		Devices:     devices,
		TrueByChord: make([]int, len(CrossingChordBands())), FoundByChord: make([]int, len(CrossingChordBands())),
	}
	type devResult struct {
		r   CrossingResult
		err error
	}
	per := make([]devResult, devices)
	parallel(devices, func(i int) {
		r := CrossingResult{TrueByChord: make([]int, 4), FoundByChord: make([]int, 4)}
		per[i].err = passDevice(seed, i, &r)
		per[i].r = r
	})
	for _, d := range per {
		if d.err != nil {
			return CrossingResult{}, d.err
		}
		res.TrueCrossings += d.r.TrueCrossings
		res.Found += d.r.Found
		res.False += d.r.False
		res.SeenInside += d.r.SeenInside
		res.TrueFixInside += d.r.TrueFixInside
		for b := range res.TrueByChord {
			res.TrueByChord[b] += d.r.TrueByChord[b]
			res.FoundByChord[b] += d.r.FoundByChord[b]
		}
		res.timeErrs = append(res.timeErrs, d.r.timeErrs...)
	}
	res.TimeErrP50S, res.TimeErrP90S = -1, -1
	if len(res.timeErrs) > 0 {
		slices.Sort(res.timeErrs)
		res.TimeErrP50S, res.TimeErrP90S = quantile(res.timeErrs, 0.5), quantile(res.timeErrs, 0.9)
	}
	return res, nil
}

func passDevice(seed int64, i int, r *CrossingResult) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 3<<40|uint64(i)))
	noise := rand.New(rand.NewPCG(uint64(seed), 4<<40|uint64(i)))
	f, err := crossingFence(i, rng)
	if err != nil {
		return fmt.Errorf("quality: crossing fence %d: %w", i, err)
	}
	cat := fences.New()
	if err := cat.Apply(1, []fences.Fence{f}, nil); err != nil {
		return fmt.Errorf("quality: crossing fence %d: %w", i, err)
	}
	snap := cat.Snapshot()
	b := f.Bounds()
	cLat, cLon := (b.South+b.North)/2, (b.West+b.East)/2
	mLon := metresPerDegree * math.Cos(cLat*math.Pi/180)
	halfM := (b.North - b.South) / 2 * metresPerDegree
	speed := 10 + 20*rng.Float64()
	heading := 2 * math.Pi * rng.Float64()
	offset := (2*rng.Float64() - 1) * (halfM*math.Sqrt2 + 60)
	ux, uy := math.Sin(heading), math.Cos(heading)
	truePos := func(s float64) (lat, lon float64) { // s metres along the road from closest approach
		x, y := offset*uy+s*ux, -offset*ux+s*uy
		return cLat + y/metresPerDegree, cLon + x/mLon
	}
	const reachM = 2500.0
	s := -reachM - 60*speed*rng.Float64()
	ms := int64(1_000_000_000_000)
	st := &geofencepb.DeviceState{DeviceId: "veh"}
	cfg := debounce.DefaultSettings()
	var prevLat, prevLon float64
	var prevMs int64
	var prevObsInside bool
	for k := 0; s <= reachM; k++ {
		lat, lon := truePos(s)
		p := &geofencepb.Ping{
			DeviceId: "veh", AccuracyM: scenarioNoiseM, DeviceTimeMs: ms, Hlc: hlc.Pack(ms, 0),
			Lat: lat + scenarioNoiseM*noise.NormFloat64()/metresPerDegree,
			Lon: lon + scenarioNoiseM*noise.NormFloat64()/mLon,
		}
		obsInside := f.SignedDistance(p.Lat, p.Lon) >= 0
		out := debounce.Apply(st, p, snap, cfg)
		var cross *geofencepb.Trigger
		for _, t := range out.Triggers {
			if t.Type == geofencepb.TriggerType_TRIGGER_TYPE_CROSS {
				cross = t
			}
		}
		isTrue := false
		if k > 0 && f.SignedDistance(prevLat, prevLon) < 0 && f.SignedDistance(lat, lon) < 0 {
			if chord, mid := f.Chord(prevLat, prevLon, lat, lon); chord > 0 {
				isTrue = true
				band := chordBand(chord)
				r.TrueCrossings++
				r.TrueByChord[band]++
				if prevObsInside || obsInside {
					r.SeenInside++
				}
				if cross != nil {
					r.Found++
					r.FoundByChord[band]++
					trueMs := float64(prevMs) + float64(ms-prevMs)*mid
					r.timeErrs = append(r.timeErrs, math.Abs(float64(cross.EventTimeMs)-trueMs)/1000)
				}
			}
		}
		if cross != nil && !isTrue {
			if chord, _ := f.Chord(prevLat, prevLon, lat, lon); chord > 0 {
				r.TrueFixInside++ // it did pass through, a true fix just inside
			} else {
				r.False++
			}
		}
		prevLat, prevLon, prevMs, prevObsInside = lat, lon, ms, obsInside
		gap := 30_000 + rng.Int64N(30_001)
		ms += gap
		s += speed * float64(gap) / 1000
	}
	return nil
}

// WriteCrossingTable prints the sparse-fix crossing scenario's scores.
func WriteCrossingTable(w io.Writer, seed int64, r CrossingResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Scenario %s: %d devices, seed %d: %s\n", r.Name, r.Devices, seed, r.Description)
	fmt.Fprintf(tw, "true crossings\t%d\t(a fix fell inside in %d)\n", r.TrueCrossings, r.SeenInside)
	fmt.Fprintf(tw, "found\t%d\t%s\n", r.Found, pct(r.Found, r.TrueCrossings))
	fmt.Fprintf(tw, "false crossings\t%d\t%s of CROSS\n", r.False, pct(r.False, r.Found+r.False+r.TrueFixInside))
	fmt.Fprintf(tw, "CROSS, path crossed, a true fix inside\t%d\t\n", r.TrueFixInside)
	for b, name := range CrossingChordBands() {
		fmt.Fprintf(tw, "found, true chord %s\t%d/%d\t%s\n", name, r.FoundByChord[b], r.TrueByChord[b], pct(r.FoundByChord[b], r.TrueByChord[b]))
	}
	fmt.Fprintf(tw, "time error p50/p90 (s)\t%.1f / %.1f\t\n", r.TimeErrP50S, r.TimeErrP90S)
	fmt.Fprintln(tw)
	return tw.Flush()
}
