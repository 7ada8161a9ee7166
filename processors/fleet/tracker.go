package fleet

import (
	"math"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
)

// maxBandMs is the longest a true crossing may spend inside a fence's edge
// band (between clearly outside and clearly inside): a longer passage runs
// along the edge, which is grazing, and the route is redrawn.
const maxBandMs = 30_000

// fenceInfo is what the simulator precomputes about one fence.
type fenceInfo struct {
	f        *fences.Fence
	lat, lon float64 // centre of its box
	halfDiag float64 // metres, centre to box corner
	// in and out are the clear margins: a point is clearly inside at
	// SignedDistance >= in and clearly outside at <= -out.
	in, out float64
}

// rawTransition is a true transition found by the tracker, before it is
// given device and fence ids.
type rawTransition struct {
	fence int32
	enter bool
	tms   int64 // simulated ms since Start
}

// fstate is the tracker's view of one (device, fence).
type fstate struct {
	side      bool // last clear side: true = inside
	contained bool // containment of the last sample
	inBand    bool
	crossed   bool
	active    bool // in tracker.active
	changes   int8 // containment changes during the current band passage
	bandStart int64
	pendingT  int64 // time of the last containment change
	runStart  int64 // first clear sample of the current run
	seen      uint32
	touched   uint32
}

type journalEntry struct {
	i  int32
	st fstate
}

// tracker classifies the noise-free samples of one device against every
// fence and enforces the truth rules (see the package doc): each crossing
// is one clean passage through the edge band, between clear runs of at
// least MinGap. A violation means the route must be redrawn. It supports
// trying a candidate segment and rolling it back.
type tracker struct {
	s      *Sim
	st     []fstate
	active []int32 // fences inside or in band
	trans  []rawTransition
	// crossed lists fences crossed at least once, for the end check.
	crossed []int32

	// candidate bookkeeping
	epoch      uint32
	journal    []journalEntry
	saveActive []int32
	saveTrans  int
	saveCross  int

	// the sample being visited by Near
	stamp   uint32
	curT    int64
	curLat  float64
	curLon  float64
	ok      bool
	visitFn func(*fences.Fence) bool
}

func newTracker(s *Sim) *tracker {
	tr := &tracker{s: s, st: make([]fstate, len(s.fences))}
	tr.visitFn = tr.visit
	return tr
}

func (tr *tracker) reset() {
	clear(tr.st)
	tr.active, tr.trans, tr.crossed, tr.journal = tr.active[:0], tr.trans[:0], tr.crossed[:0], tr.journal[:0]
	tr.epoch, tr.stamp = 0, 0
}

// begin starts a candidate that rollback can undo.
func (tr *tracker) begin() {
	tr.epoch++
	tr.journal = tr.journal[:0]
	tr.saveActive = append(tr.saveActive[:0], tr.active...)
	tr.saveTrans, tr.saveCross = len(tr.trans), len(tr.crossed)
}

func (tr *tracker) rollback() {
	for _, j := range tr.journal {
		tr.st[j.i] = j.st
	}
	tr.active = append(tr.active[:0], tr.saveActive...)
	tr.trans, tr.crossed = tr.trans[:tr.saveTrans], tr.crossed[:tr.saveCross]
}

func (tr *tracker) touch(i int32) *fstate {
	s := &tr.st[i]
	if s.touched != tr.epoch {
		tr.journal = append(tr.journal, journalEntry{i, *s})
		s.touched = tr.epoch
	}
	return s
}

// sample feeds the true position at simulated time t (ms); false means a
// rule is violated.
func (tr *tracker) sample(t int64, lat, lon float64) bool {
	tr.stamp++
	tr.curT, tr.curLat, tr.curLon, tr.ok = t, lat, lon, true
	tr.s.snap.Near(lat, lon, tr.s.nearMargin, tr.visitFn)
	if !tr.ok {
		return false
	}
	// Fences that are inside or in band but no longer near: clearly out.
	for k := 0; k < len(tr.active); k++ {
		i := tr.active[k]
		if tr.st[i].seen == tr.stamp {
			continue
		}
		n := len(tr.active)
		if !tr.step(i, t, math.Inf(-1)) {
			return false
		}
		if len(tr.active) < n { // i was removed by swapping the last in
			k--
		}
	}
	return true
}

func (tr *tracker) visit(f *fences.Fence) bool {
	i := tr.s.index[f.ID]
	tr.st[i].seen = tr.stamp
	if !tr.step(i, tr.curT, f.SignedDistance(tr.curLat, tr.curLon)) {
		tr.ok = false
		return false
	}
	return true
}

func (tr *tracker) setActive(i int32, s *fstate, on bool) {
	if s.active == on {
		return
	}
	s.active = on
	if on {
		tr.active = append(tr.active, i)
		return
	}
	for k, j := range tr.active {
		if j == i {
			last := len(tr.active) - 1
			tr.active[k] = tr.active[last]
			tr.active = tr.active[:last]
			return
		}
	}
}

// step applies one sample at signed distance d to fence i.
func (tr *tracker) step(i int32, t int64, d float64) bool {
	fi := &tr.s.fences[i]
	if math.IsNaN(d) {
		return false
	}
	s := tr.touch(i)
	contained := d >= 0
	if contained != s.contained {
		s.changes++
		s.pendingT = t
		s.contained = contained
	}
	if d > -fi.out && d < fi.in { // in the band
		if !s.inBand {
			s.inBand, s.bandStart = true, t
			tr.setActive(i, s, true)
		}
		return t-s.bandStart <= maxBandMs
	}
	side := d >= fi.in
	if !s.inBand && side == s.side {
		return true // the clear run goes on
	}
	start := t
	if s.inBand {
		start = s.bandStart
	}
	if side == s.side || s.changes != 1 {
		return false // grazed the edge, or crossed it more than once
	}
	if s.crossed && start-s.runStart < tr.s.minGapMs {
		return false // too soon after the previous crossing
	}
	tr.trans = append(tr.trans, rawTransition{fence: i, enter: side, tms: s.pendingT})
	if !s.crossed {
		s.crossed = true
		tr.crossed = append(tr.crossed, i)
	}
	s.side, s.runStart, s.inBand, s.changes = side, t, false, 0
	tr.setActive(i, s, side)
	return true
}

// final checks the end of the simulated span (end = the time just after
// the last sample): no fence in band, and every fence crossed has been
// clearly on its last side for at least MinGap.
func (tr *tracker) final(end int64) bool {
	for _, i := range tr.active {
		if tr.st[i].inBand {
			return false
		}
	}
	for _, i := range tr.crossed {
		if end-tr.st[i].runStart < tr.s.minGapMs {
			return false
		}
	}
	return true
}

func (r rawTransition) typ() geofencepb.TriggerType {
	if r.enter {
		return geofencepb.TriggerType_TRIGGER_TYPE_ENTER
	}
	return geofencepb.TriggerType_TRIGGER_TYPE_EXIT
}
