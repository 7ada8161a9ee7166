package fleet

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/topology/hlc"
	"github.com/paulmach/orb"
)

type fenceRef = fences.Fence

// Random streams: every device draws from its own generators, seeded from
// (Seed, stream, device index), so results do not depend on scheduling.
const (
	streamRoute uint64 = iota + 1
	streamNoise
	streamParked
)

// Sim is a seeded, reproducible fleet: routes, parked positions and ground
// truth are drawn once by New; Pings and Stream replay them with GPS noise
// drawn afresh (from the same seed) on every call. A Sim is safe for
// concurrent use.
type Sim struct {
	cfg        Config
	snap       *fences.Snapshot
	fences     []fenceInfo // in snapshot order (sorted by id)
	index      map[string]int32
	nearMargin float64
	minGapMs   int64
	intervalMs int64
	spanMs     int64 // Duration, or Lap when Duration is 0
	ticks      int64 // ticks per span

	routes []route        // moving devices
	parked []parkedDevice // parked devices
	truth  Truth
	stats  Stats
}

// Stats describes how New drew the fleet.
type Stats struct {
	// RouteAttempts is the number of whole routes drawn, redraws included
	// (at least Moving).
	RouteAttempts int
}

type parkedDevice struct {
	lat, lon float64
	truth    ParkedTruth
}

// Transition is one true crossing of a fence boundary by a moving device.
type Transition struct {
	DeviceID, FenceID string
	Type              geofencepb.TriggerType // ENTER or EXIT
	// TimeMs is the event time (Unix ms) of the first ping whose true
	// position is on the new side.
	TimeMs int64
}

// ParkedTruth is where a parked device truly is.
type ParkedTruth struct {
	FenceID string
	Inside  bool
	// DistanceM is the true distance from the fence's edge, >= 0; Inside
	// gives the side.
	DistanceM float64
}

// Truth is the ground truth of the noise-free trajectories over the span
// Pings covers (Duration, or one lap).
type Truth struct {
	// Transitions are every true crossing by a moving device, sampled at
	// the ping times, sorted by TimeMs, then DeviceID, then FenceID. Per
	// (device, fence) they alternate ENTER, EXIT, ... starting with ENTER.
	Transitions []Transition
	// FinalInside maps a fence id to the devices (moving and parked) truly
	// inside it at the last sample, sorted; fences with none are absent.
	FinalInside map[string][]string
	// Parked maps each parked device to its fence and true side.
	Parked map[string]ParkedTruth
}

// New draws a fleet over the fences fs (at least one, unique ids). It
// fails with ErrInvalidConfig for a bad Config or fence set and ErrNoRoute
// when some moving device cannot be routed under the truth rules.
func New(cfg Config, fs []fences.Fence) (*Sim, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 && cfg.Moving+cfg.Parked > 0 {
		return nil, fmt.Errorf("%w: no fences", ErrInvalidConfig)
	}
	seen := make(map[string]bool, len(fs))
	for _, f := range fs {
		if seen[f.ID] {
			return nil, fmt.Errorf("%w: duplicate fence id %q", ErrInvalidConfig, f.ID)
		}
		seen[f.ID] = true
	}
	cat := fences.New()
	if err := cat.Apply(1, fs, nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &Sim{cfg: cfg, snap: cat.Snapshot(), index: make(map[string]int32, len(fs))}
	s.intervalMs = cfg.Interval.Milliseconds()
	s.minGapMs = cfg.MinGap.Milliseconds()
	s.spanMs = cfg.Duration.Milliseconds()
	if cfg.Duration == 0 {
		s.spanMs = cfg.Lap.Milliseconds()
	}
	s.ticks = (s.spanMs + s.intervalMs - 1) / s.intervalMs
	noise := 3*cfg.NoiseSigmaM + 1 // 3σ, plus a metre for projection error
	all := s.snap.All()
	s.fences = make([]fenceInfo, len(all))
	for i := range all {
		f := &all[i]
		s.index[f.ID] = int32(i)
		b := f.Bounds()
		east := b.East
		if east < b.West {
			east += 360
		}
		lat, lon := (b.South+b.North)/2, wrapLon((b.West+east)/2)
		hyst := f.Settings.HysteresisM
		if hyst == 0 {
			hyst = cfg.HysteresisM
		}
		fi := fenceInfo{f: f, lat: lat, lon: lon, in: cfg.AccuracyM + noise, out: math.Max(hyst, cfg.AccuracyM) + noise}
		x, y := newProj(lat, lon).xy(b.North, east)
		fi.halfDiag = math.Hypot(x, y)
		s.fences[i] = fi
		s.nearMargin = math.Max(s.nearMargin, fi.out+1)
	}

	s.routes = make([]route, cfg.Moving)
	s.parked = make([]parkedDevice, cfg.Parked)
	trans := make([][]rawTransition, cfg.Moving)
	attempts := make([]int, cfg.Moving)
	errs := make([]error, cfg.Moving+cfg.Parked)
	parallel(cfg.Moving+cfg.Parked, func(i int) {
		if i < cfg.Moving {
			s.routes[i], trans[i], attempts[i], errs[i] = s.buildRoute(i)
			return
		}
		s.parked[i-cfg.Moving], errs[i] = s.placeParked(i - cfg.Moving)
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for _, a := range attempts {
		s.stats.RouteAttempts += a
	}
	s.truth = s.buildTruth(trans)
	return s, nil
}

// parallel runs fn(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// rng returns the generator of one stream of one device.
func (s *Sim) rng(stream uint64, dev int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(s.cfg.Seed), stream<<40|uint64(dev)))
}

func (s *Sim) deviceID(dev int) string {
	if dev < s.cfg.Moving {
		return fmt.Sprintf("veh-%04d", dev+1)
	}
	return fmt.Sprintf("park-%04d", dev-s.cfg.Moving+1)
}

// Config returns the configuration with defaults applied.
func (s *Sim) Config() Config { return s.cfg }

// Stats describes how the fleet was drawn.
func (s *Sim) Stats() Stats { return s.stats }

// Devices returns every device id in ping order within a tick: moving
// devices, then parked ones.
func (s *Sim) Devices() []string {
	ids := make([]string, s.cfg.Moving+s.cfg.Parked)
	for i := range ids {
		ids[i] = s.deviceID(i)
	}
	return ids
}

// Ticks is the number of ping rounds Pings covers; every device pings once
// per tick.
func (s *Sim) Ticks() int { return int(s.ticks) }

// Span is the simulated time Pings and Truth cover: Duration, or one lap.
func (s *Sim) Span() time.Duration { return time.Duration(s.spanMs) * time.Millisecond }

// placeParked puts parked device k at the configured distance from the edge
// of a random fence, clear of every other fence's band.
func (s *Sim) placeParked(k int) (parkedDevice, error) {
	rng := s.rng(streamParked, k)
	inside := k%2 == 0
	offset := s.cfg.ParkedOffsetM
	if far := s.cfg.FarParked; far > 0 { // every k-th device, far of them
		every := s.cfg.Parked / far
		if (k+1)%every == 0 && (k+1)/every <= far {
			offset = s.cfg.ParkedFarM
		}
	}
	target := -offset
	if inside {
		target = offset
	}
	for range 500 {
		fi := &s.fences[rng.IntN(len(s.fences))]
		lat, lon, ok := edgePoint(rng, fi, target)
		if !ok {
			continue
		}
		if !s.clearOfOthers(lat, lon, fi.f.ID) {
			continue
		}
		d := fi.f.SignedDistance(lat, lon)
		return parkedDevice{lat: lat, lon: lon, truth: ParkedTruth{FenceID: fi.f.ID, Inside: d >= 0, DistanceM: math.Abs(d)}}, nil
	}
	return parkedDevice{}, fmt.Errorf("%w: cannot park %s %v m from any fence edge", ErrNoRoute, s.deviceID(s.cfg.Moving+k), offset)
}

// clearOfOthers reports whether (lat, lon) is clear of every fence but id.
func (s *Sim) clearOfOthers(lat, lon float64, id string) bool {
	clear := true
	s.snap.Near(lat, lon, s.nearMargin, func(f *fenceRef) bool {
		if f.ID == id {
			return true
		}
		fi := &s.fences[s.index[f.ID]]
		if d := f.SignedDistance(lat, lon); d > -fi.out && d < fi.in {
			clear = false
		}
		return clear
	})
	return clear
}

// edgePoint finds a point at signed distance target (metres, + inside)
// from fence fi's edge: a random point of the boundary (away from
// vertices), moved along the edge normal and refined by the secant method.
func edgePoint(rng *rand.Rand, fi *fenceInfo, target float64) (lat, lon float64, ok bool) {
	p := newProj(fi.lat, fi.lon)
	var ex, ey, nx, ny float64 // boundary point and a unit normal
	if fi.f.IsCircle() {
		a := rng.Float64() * 2 * math.Pi
		nx, ny = math.Sin(a), math.Cos(a)
		ex, ey = fi.f.RadiusM*nx, fi.f.RadiusM*ny // centre is the origin
	} else {
		type edge struct{ ax, ay, bx, by, l float64 }
		var edges []edge
		total := 0.0
		for _, ring := range rings(fi.f) {
			for i := 0; i+1 < len(ring); i++ {
				ax, ay := p.xy(ring[i][1], ring[i][0])
				bx, by := p.xy(ring[i+1][1], ring[i+1][0])
				l := math.Hypot(bx-ax, by-ay)
				if l < 4*math.Abs(target)+4 {
					continue
				}
				edges = append(edges, edge{ax, ay, bx, by, l})
				total += l
			}
		}
		if total == 0 {
			return 0, 0, false
		}
		pick := rng.Float64() * total
		e := edges[len(edges)-1]
		for _, c := range edges {
			if pick < c.l {
				e = c
				break
			}
			pick -= c.l
		}
		f := 0.25 + rng.Float64()*0.5
		ex, ey = e.ax+f*(e.bx-e.ax), e.ay+f*(e.by-e.ay)
		nx, ny = (e.by-e.ay)/e.l, -(e.bx-e.ax)/e.l
	}
	// Orient the normal inwards.
	if lat, lon := p.latLon(ex+nx, ey+ny); fi.f.SignedDistance(lat, lon) < 0 {
		nx, ny = -nx, -ny
	}
	g := func(s float64) float64 {
		lat, lon := p.latLon(ex+s*nx, ey+s*ny)
		return fi.f.SignedDistance(lat, lon) - target
	}
	s0, s1 := target, target+1
	g0, g1 := g(s0), g(s1)
	for range 8 {
		if math.Abs(g1) < 1e-4 {
			lat, lon = p.latLon(ex+s1*nx, ey+s1*ny)
			return lat, lon, true
		}
		if g1 == g0 || math.IsNaN(g1) {
			return 0, 0, false
		}
		s0, s1, g0 = s1, s1-g1*(s1-s0)/(g1-g0), g1
		g1 = g(s1)
	}
	return 0, 0, false
}

// rings returns every ring (outer rings and holes) of a polygon fence.
func rings(f *fences.Fence) []orb.Ring {
	switch g := f.Geometry.(type) {
	case orb.Polygon:
		return g
	case orb.MultiPolygon:
		var out []orb.Ring
		for _, poly := range g {
			out = append(out, poly...)
		}
		return out
	}
	return nil
}

// buildTruth assembles Truth from the routes' transitions and the final
// positions.
func (s *Sim) buildTruth(trans [][]rawTransition) Truth {
	t := Truth{FinalInside: map[string][]string{}, Parked: make(map[string]ParkedTruth, len(s.parked))}
	start := s.cfg.Start.UnixMilli()
	for dev, ts := range trans {
		id := s.deviceID(dev)
		for _, r := range ts {
			t.Transitions = append(t.Transitions, Transition{DeviceID: id, FenceID: s.fences[r.fence].f.ID, Type: r.typ(), TimeMs: start + r.tms})
		}
	}
	slices.SortFunc(t.Transitions, func(a, b Transition) int {
		if a.TimeMs != b.TimeMs {
			if a.TimeMs < b.TimeMs {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.DeviceID, b.DeviceID); c != 0 {
			return c
		}
		return strings.Compare(a.FenceID, b.FenceID)
	})
	lastT := float64((s.ticks - 1) * s.intervalMs)
	inside := func(id string, lat, lon float64) {
		s.snap.Near(lat, lon, 0, func(f *fenceRef) bool {
			if f.Contains(lat, lon) {
				t.FinalInside[f.ID] = append(t.FinalInside[f.ID], id)
			}
			return true
		})
	}
	for dev := range s.routes {
		r := &s.routes[dev]
		cursor := 0
		x, y, _, _ := r.at(lastT, &cursor)
		lat, lon := r.p.latLon(x, y)
		inside(s.deviceID(dev), lat, lon)
	}
	for k, p := range s.parked {
		id := s.deviceID(s.cfg.Moving + k)
		t.Parked[id] = p.truth
		inside(id, p.lat, p.lon)
	}
	for _, ids := range t.FinalInside {
		slices.Sort(ids)
	}
	return t
}

// Truth returns the ground truth (a deep copy).
func (s *Sim) Truth() Truth {
	t := Truth{
		Transitions: slices.Clone(s.truth.Transitions),
		FinalInside: make(map[string][]string, len(s.truth.FinalInside)),
		Parked:      make(map[string]ParkedTruth, len(s.truth.Parked)),
	}
	for k, v := range s.truth.FinalInside {
		t.FinalInside[k] = slices.Clone(v)
	}
	for k, v := range s.truth.Parked {
		t.Parked[k] = v
	}
	return t
}

// Triggers turns the true transitions into the ENTER/EXIT triggers a
// perfect debouncer would emit, in the same order: event time and HLC from
// the transition time (the HLC's logical part orders a device's
// transitions within one millisecond), reason CONFIRMED. TriggerId is left
// empty: it is the debouncer's to assign.
func (t Truth) Triggers() []*geofencepb.Trigger {
	out := make([]*geofencepb.Trigger, len(t.Transitions))
	last := map[string]uint64{}
	for i, tr := range t.Transitions {
		h := hlc.Pack(tr.TimeMs, 0)
		if l, ok := last[tr.DeviceID]; ok && h <= l {
			h = l + 1
		}
		last[tr.DeviceID] = h
		out[i] = &geofencepb.Trigger{
			DeviceId:    tr.DeviceID,
			FenceId:     tr.FenceID,
			Type:        tr.Type,
			Reason:      geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED,
			EventTimeMs: tr.TimeMs,
			Hlc:         h,
		}
	}
	return out
}

// pinger replays one device's pings.
type pinger struct {
	s      *Sim
	id     string
	r      *route // nil when parked
	lat    float64
	lon    float64
	noise  *rand.Rand
	cursor int
}

func (s *Sim) pingers() []pinger {
	ps := make([]pinger, s.cfg.Moving+s.cfg.Parked)
	for i := range ps {
		p := &ps[i]
		p.s, p.id, p.noise = s, s.deviceID(i), s.rng(streamNoise, i)
		if i < s.cfg.Moving {
			p.r = &s.routes[i]
		} else {
			p.lat, p.lon = s.parked[i-s.cfg.Moving].lat, s.parked[i-s.cfg.Moving].lon
		}
	}
	return ps
}

// fill writes the device's ping of tick i into dst.
func (p *pinger) fill(i int64, dst *geofencepb.Ping) {
	s := p.s
	t := i * s.intervalMs
	lat, lon, speed, hdg := p.lat, p.lon, 0.0, 0.0
	if p.r != nil {
		x, y, sp, h := p.r.at(float64(t%s.spanMs), &p.cursor)
		lat, lon = p.r.p.latLon(x, y)
		speed, hdg = sp, h
	}
	sigma := s.cfg.NoiseSigmaM
	lat, lon = offsetLatLon(lat, lon, p.noise.NormFloat64()*sigma, p.noise.NormFloat64()*sigma)
	dst.DeviceId = p.id
	dst.Lat, dst.Lon = lat, lon
	dst.AccuracyM = s.cfg.AccuracyM
	dst.SpeedMps, dst.HeadingDeg = speed, hdg
	dst.DeviceTimeMs = s.cfg.Start.UnixMilli() + t
	if s.cfg.StampHLC {
		dst.Hlc = hlc.Pack(dst.DeviceTimeMs, 0)
	}
}

// Pings returns every ping of the span (Duration, or one lap) in event-time
// order, devices in Devices order within a tick. Each call returns new
// pings, identical to the previous call's and to the first pings of Stream.
func (s *Sim) Pings() []*geofencepb.Ping {
	ps := s.pingers()
	n := int64(len(ps))
	slab := make([]geofencepb.Ping, s.ticks*n)
	out := make([]*geofencepb.Ping, s.ticks*n)
	parallel(len(ps), func(d int) {
		p := &ps[d]
		for i := range s.ticks {
			k := i*n + int64(d)
			p.fill(i, &slab[k])
			out[k] = &slab[k]
		}
	})
	return out
}

// Stream calls fn with every ping, tick by tick in the order of Pings,
// until the span ends (never, when Duration is 0: the laps repeat with
// event time moving on), fn returns false (Stream returns nil) or ctx ends
// (Stream returns ctx.Err()). With Config.Pace set, tick i is not delivered
// before Interval×i/Pace of wall time has passed since the call.
func (s *Sim) Stream(ctx context.Context, fn func(*geofencepb.Ping) bool) error {
	ps := s.pingers()
	wall0 := time.Now()
	var timer *time.Timer
	for i := int64(0); s.cfg.Duration == 0 || i < s.ticks; i++ {
		if s.cfg.Pace > 0 {
			due := wall0.Add(time.Duration(float64(time.Duration(i)*s.cfg.Interval) / s.cfg.Pace))
			if wait := time.Until(due); wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
					defer timer.Stop()
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
				}
			}
		}
		for d := range ps {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := new(geofencepb.Ping)
			ps[d].fill(i, p)
			if !fn(p) {
				return nil
			}
		}
	}
	return ctx.Err()
}

// TruePosition is where device truly was (no noise) at event time tMs, for
// scoring: e.g. when a device cleared a fence's hysteresis band. ok is false
// for an unknown device or a time before Start.
func (s *Sim) TruePosition(device string, tMs int64) (lat, lon float64, ok bool) {
	t := tMs - s.cfg.Start.UnixMilli()
	if t < 0 {
		return 0, 0, false
	}
	for i := 0; i < s.cfg.Moving+s.cfg.Parked; i++ {
		if s.deviceID(i) != device {
			continue
		}
		if i >= s.cfg.Moving {
			p := s.parked[i-s.cfg.Moving]
			return p.lat, p.lon, true
		}
		r := &s.routes[i]
		cursor := 0
		x, y, _, _ := r.at(float64(t%s.spanMs), &cursor)
		lat, lon = r.p.latLon(x, y)
		return lat, lon, true
	}
	return 0, 0, false
}
