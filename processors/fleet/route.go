package fleet

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Route generation parameters.
const (
	maxRouteAttempts  = 60   // whole-route redraws per device before New fails
	maxCandidates     = 40   // next-waypoint draws per step before falling back
	maxWaypointTries  = 25   // random points tried inside a target fence
	neighbourRadiusM  = 5000 // targets are fences whose centre is this close
	freeWaypointShare = 0.2  // share of waypoints outside every fence
	waypointDepthM    = 10   // extra depth of a waypoint beyond the clear margin
)

// knot is a point of a route: the device is at (x, y) at time t (ms since
// Start); between knots it moves in a straight line at constant speed.
type knot struct {
	t    float64
	x, y float64
	// speed (m/s) and heading (degrees) of the leg that starts here.
	speed, heading float64
}

// route is the noise-free trajectory of one moving device.
type route struct {
	p     proj
	knots []knot
}

// at returns the position at time t (ms, within the route), starting the
// search at *cursor (routes are read forwards; a smaller t resets it).
func (r *route) at(t float64, cursor *int) (x, y, speed, hdg float64) {
	c := *cursor
	if c >= len(r.knots) || r.knots[c].t > t {
		c = 0
	}
	for c+1 < len(r.knots) && r.knots[c+1].t <= t {
		c++
	}
	*cursor = c
	k := r.knots[c]
	if c+1 == len(r.knots) {
		return k.x, k.y, 0, k.heading
	}
	n := r.knots[c+1]
	f := 0.0
	if n.t > k.t {
		f = (t - k.t) / (n.t - k.t)
	}
	return k.x + f*(n.x-k.x), k.y + f*(n.y-k.y), k.speed, k.heading
}

// finish fills in leg speeds and headings; a stationary leg keeps the
// previous heading.
func (r *route) finish() {
	h := 0.0
	for i := range r.knots {
		k := &r.knots[i]
		k.speed, k.heading = 0, h
		if i+1 < len(r.knots) {
			n := r.knots[i+1]
			dx, dy := n.x-k.x, n.y-k.y
			if dist := math.Hypot(dx, dy); dist > 0 && n.t > k.t {
				h = heading(dx, dy)
				k.speed, k.heading = dist/((n.t-k.t)/1000), h
			}
		}
	}
}

// clearOfAll reports whether (lat, lon) is clearly inside or clearly
// outside every fence, and whether it is inside any.
func (s *Sim) clearOfAll(lat, lon float64) (clear, inside bool) {
	clear = true
	s.snap.Near(lat, lon, s.nearMargin, func(f *fenceRef) bool {
		fi := &s.fences[s.index[f.ID]]
		d := f.SignedDistance(lat, lon)
		switch {
		case d >= fi.in:
			inside = true
		case d <= -fi.out:
		default:
			clear = false
			return false
		}
		return true
	})
	return clear, inside
}

// pickStart draws a start point clearly outside every fence, a few hundred
// metres to two kilometres from a random fence.
func (s *Sim) pickStart(rng *rand.Rand) (lat, lon float64, ok bool) {
	for range 200 {
		fi := &s.fences[rng.IntN(len(s.fences))]
		p := newProj(fi.lat, fi.lon)
		r := fi.halfDiag + 200 + rng.Float64()*1800
		a := rng.Float64() * 2 * math.Pi
		lat, lon = p.latLon(r*math.Sin(a), r*math.Cos(a))
		if clear, inside := s.clearOfAll(lat, lon); clear && !inside {
			return lat, lon, true
		}
	}
	return 0, 0, false
}

// pickWaypoint draws the next waypoint from (lat, lon): usually a point
// well inside a nearby fence, sometimes a point outside every fence. The
// waypoint is clear of every fence's edge band.
func (s *Sim) pickWaypoint(rng *rand.Rand, lat, lon float64, near []int32) (wlat, wlon float64, inside, ok bool) {
	if rng.Float64() < freeWaypointShare {
		p := newProj(lat, lon)
		r := 500 + rng.Float64()*2500
		a := rng.Float64() * 2 * math.Pi
		wlat, wlon = p.latLon(r*math.Sin(a), r*math.Cos(a))
		if clear, in := s.clearOfAll(wlat, wlon); clear && !in {
			return wlat, wlon, false, true
		}
		return 0, 0, false, false
	}
	fi := &s.fences[near[rng.IntN(len(near))]]
	b := fi.f.Bounds()
	east := b.East
	if east < b.West {
		east += 360
	}
	for range maxWaypointTries {
		wlat = b.South + rng.Float64()*(b.North-b.South)
		wlon = wrapLon(b.West + rng.Float64()*(east-b.West))
		if fi.f.SignedDistance(wlat, wlon) < fi.in+waypointDepthM {
			continue
		}
		if clear, _ := s.clearOfAll(wlat, wlon); clear {
			return wlat, wlon, true, true
		}
	}
	return 0, 0, false, false
}

// neighbours lists the fences whose centres lie within neighbourRadiusM
// of (lat, lon), or the three nearest when fewer do.
func (s *Sim) neighbours(lat, lon float64, dst []int32) []int32 {
	type cand struct {
		i int32
		d float64
	}
	p := newProj(lat, lon)
	all := make([]cand, len(s.fences))
	dst = dst[:0]
	for i := range s.fences {
		x, y := p.xy(s.fences[i].lat, s.fences[i].lon)
		all[i] = cand{int32(i), math.Hypot(x, y)}
		if all[i].d <= neighbourRadiusM {
			dst = append(dst, int32(i))
		}
	}
	if len(dst) >= 3 {
		return dst
	}
	slices.SortFunc(all, func(a, b cand) int {
		if a.d != b.d {
			if a.d < b.d {
				return -1
			}
			return 1
		}
		return int(a.i - b.i)
	})
	dst = dst[:0]
	for _, c := range all[:min(3, len(all))] {
		dst = append(dst, c.i)
	}
	return dst
}

// routeBuilder draws one device's route.
type routeBuilder struct {
	s    *Sim
	rng  *rand.Rand
	tr   *tracker
	r    route
	tick int64 // next tick index to evaluate
	near []int32
}

// build draws a route and its true transitions for moving device dev. See
// the package doc for the rules.
func (s *Sim) buildRoute(dev int) (route, []rawTransition, int, error) {
	b := &routeBuilder{s: s, rng: s.rng(streamRoute, dev), tr: newTracker(s)}
	var last route
	var lastTrans []rawTransition
	for attempt := 1; attempt <= maxRouteAttempts; attempt++ {
		if !b.attempt() {
			continue
		}
		if s.cfg.Duration == 0 { // lap: validate the whole closed lap afresh
			if !b.verify() {
				continue
			}
		}
		last, lastTrans = b.r, slices.Clone(b.tr.trans)
		// A route without a crossing is accepted only when several
		// attempts found none (a very short Duration).
		if len(lastTrans) > 0 || attempt >= maxRouteAttempts/3 {
			return last, lastTrans, attempt, nil
		}
	}
	if last.knots != nil {
		return last, lastTrans, maxRouteAttempts, nil
	}
	return route{}, nil, maxRouteAttempts, fmt.Errorf("%w for %s after %d attempts (fences too dense, or duration too short for min gap %v?)",
		ErrNoRoute, s.deviceID(dev), maxRouteAttempts, s.cfg.MinGap)
}

func (b *routeBuilder) pos(x, y float64) (lat, lon float64) { return b.r.p.latLon(x, y) }

// evalLeg feeds the tracker the ticks before end (ms) while the device
// moves from (x0, y0) at t0 to (x1, y1) at t1 and stays there after.
func (b *routeBuilder) evalLeg(t0, x0, y0, t1, x1, y1, end float64) bool {
	iv := b.s.intervalMs
	for ; float64(b.tick*iv) < end && b.tick < b.s.ticks; b.tick++ {
		t := float64(b.tick * iv)
		x, y := x1, y1
		if t < t1 && t1 > t0 {
			f := (t - t0) / (t1 - t0)
			x, y = x0+f*(x1-x0), y0+f*(y1-y0)
		}
		lat, lon := b.pos(x, y)
		if !b.tr.sample(b.tick*iv, lat, lon) {
			return false
		}
	}
	return true
}

// attempt draws one route forwards from a fresh start point: the whole
// span when Duration is set, else the first half of a lap (then mirrored).
func (b *routeBuilder) attempt() bool {
	s := b.s
	b.tr.reset()
	b.tick = 0
	lat, lon, ok := s.pickStart(b.rng)
	if !ok {
		return false
	}
	b.r = route{p: newProj(lat, lon), knots: []knot{{t: 0}}}
	span := float64(s.spanMs)
	limit := span
	T := 0.0
	if s.cfg.Duration == 0 {
		// Park at the start for MinGap, so that the lap's wrap-around is
		// clear, and keep the forward half within half the rest.
		h0 := float64(s.minGapMs)
		b.r.knots = append(b.r.knots, knot{t: h0})
		T = h0
		limit = h0 + (span-h0)/2
	}
	speed := s.cfg.SpeedMPS
	minGap := float64(s.minGapMs)
	for T < limit {
		cur := b.r.knots[len(b.r.knots)-1]
		clat, clon := b.pos(cur.x, cur.y)
		b.near = s.neighbours(clat, clon, b.near)
		committed := false
		for range maxCandidates {
			wlat, wlon, inside, ok := s.pickWaypoint(b.rng, clat, clon, b.near)
			if !ok {
				continue
			}
			wx, wy := b.r.p.xy(wlat, wlon)
			drive := math.Hypot(wx-cur.x, wy-cur.y) / speed * 1000
			pause := b.rng.Float64() * 20_000
			if inside {
				pause = minGap + b.rng.Float64()*minGap
			}
			end := T + drive + pause
			if s.cfg.Duration == 0 && end > limit {
				continue
			}
			tick := b.tick
			b.tr.begin()
			if b.evalLeg(T, cur.x, cur.y, T+drive, wx, wy, end) && (end < span || b.tr.final(s.spanMs)) {
				b.r.knots = append(b.r.knots, knot{t: T + drive, x: wx, y: wy}, knot{t: end, x: wx, y: wy})
				T = end
				committed = true
				break
			}
			b.tr.rollback()
			b.tick = tick
		}
		if committed {
			continue
		}
		if s.cfg.Duration == 0 {
			break // turn round here
		}
		// Stay put until the end.
		b.tr.begin()
		if !b.evalLeg(T, cur.x, cur.y, T, cur.x, cur.y, span) || !b.tr.final(s.spanMs) {
			return false
		}
		b.r.knots = append(b.r.knots, knot{t: span, x: cur.x, y: cur.y})
		T = span
	}
	if s.cfg.Duration == 0 {
		b.mirror(T)
	}
	b.r.finish()
	return true
}

// mirror closes a lap: wait at the turning point, then drive the forward
// part backwards so the lap ends where it began, at exactly the lap length.
func (b *routeBuilder) mirror(T float64) {
	span := float64(b.s.spanMs)
	h0 := float64(b.s.minGapMs)
	fwd := b.r.knots
	turn := T + (span - 2*T + h0) // time the way back starts
	out := slices.Clone(fwd)
	for j := len(fwd) - 1; j >= 0; j-- {
		if fwd[j].t < h0 {
			break
		}
		out = append(out, knot{t: turn + (T - fwd[j].t), x: fwd[j].x, y: fwd[j].y})
	}
	out[len(out)-1].t = span
	b.r.knots = out
}

// verify replays the finished route on the tick grid with a fresh tracker.
func (b *routeBuilder) verify() bool {
	b.tr.reset()
	cursor := 0
	for i := int64(0); i < b.s.ticks; i++ {
		t := i * b.s.intervalMs
		x, y, _, _ := b.r.at(float64(t), &cursor)
		lat, lon := b.pos(x, y)
		if !b.tr.sample(t, lat, lon) {
			return false
		}
	}
	return b.tr.final(b.s.spanMs)
}
