package dueindex

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/lovoo/goka/storage"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
)

// noDue marks a clock a key has no timer on.
const noDue = math.MaxInt64

const (
	clockStream = 0
	clockWall   = 1
)

// keySlot is one key of a partition's index.
type keySlot struct {
	key string
	due [2]int64 // earliest due time per clock, Unix ms; noDue if none
	pos [2]int32 // position in the clock's heap; -1 when not in it
	// sentMs is when a tick was sent for the key and not yet handled (0:
	// none). A key with a tick in flight is in neither heap.
	sentMs int64
	gen    uint32 // bumped when the slot is reused, so stale flights are known
	look   uint32 // Part.look when its last tick was sent
}

// hent is a heap entry: at is never after its key's due time on the heap's
// clock (it is earlier after a move later, until corrected at the top).
type hent struct {
	at   int64
	slot int32
}

// flight is a tick in flight, oldest first in Part.flights.
type flight struct {
	slot   int32
	gen    uint32
	sentMs int64
}

// Part is the index of one partition. Its methods lock it: commits of
// the partition's callbacks and the timer driver's looks meet here.
type Part struct {
	mu      sync.Mutex
	slots   map[string]int32
	keys    []keySlot
	free    []int32
	heaps   [2][]hent // per clock, a min-heap by at
	flights []flight
	nFlying int
	// streamMs: the highest stream time the partition's envelopes recorded
	// when the index was built (scanTimers); read once, by the restore.
	streamMs int64
	// more: the last look at the partition stopped at its batch (or its
	// budget of heap fixes) with due keys left; refillAt is the in-flight
	// count at or below which a handled tick asks for the next batch
	// (handled), instead of the rest waiting for the next look.
	more     bool
	refillAt int
	refill   atomic.Bool // the driver is asked to look at this partition now
	look     uint32      // counts the looks (not the refills) at the partition
}

func NewPart() *Part { return &Part{slots: map[string]int32{}} }

// earliest is the earliest due time per clock of timers.
func earliest(timers []*kitpb.Timer) (due [2]int64, any bool) {
	due = [2]int64{noDue, noDue}
	for _, t := range timers {
		if c, ok := clockOf(t.GetKind()); ok {
			due[c] = min(due[c], t.GetAtMs())
			any = true
		}
	}
	return due, any
}

func clockOf(k kitpb.TimerKind) (int, bool) {
	switch k {
	case kitpb.TimerKind_TIMER_KIND_STREAM:
		return clockStream, true
	case kitpb.TimerKind_TIMER_KIND_WALL:
		return clockWall, true
	}
	return 0, false
}

// Set records that key's timers are now timers (none: the key leaves the
// index).
func (p *Part) Set(key string, timers []*kitpb.Timer) {
	due, ok := earliest(timers)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(key, due, ok)
}

func (p *Part) setLocked(key string, due [2]int64, ok bool) {
	id, have := p.slots[key]
	if !ok {
		if have {
			p.removeLocked(id)
		}
		return
	}
	if !have {
		id = p.alloc(key)
	}
	s := &p.keys[id]
	s.due = due
	if s.sentMs != 0 {
		return // back in the heaps when its tick is handled (or resent)
	}
	for c := range 2 {
		p.place(id, c)
	}
}

// Remove takes key out of the index (its value was deleted).
func (p *Part) Remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.slots[key]; ok {
		p.removeLocked(id)
	}
}

func (p *Part) removeLocked(id int32) {
	s := &p.keys[id]
	for c := range 2 {
		if s.pos[c] >= 0 {
			p.heapRemove(c, s.pos[c])
		}
	}
	if s.sentMs != 0 {
		p.nFlying--
	}
	delete(p.slots, s.key)
	*s = keySlot{pos: [2]int32{-1, -1}, gen: s.gen + 1}
	p.free = append(p.free, id)
}

func (p *Part) alloc(key string) int32 {
	var id int32
	if n := len(p.free); n > 0 {
		id = p.free[n-1]
		p.free = p.free[:n-1]
		p.keys[id].key = key
	} else {
		id = int32(len(p.keys))
		p.keys = append(p.keys, keySlot{key: key, pos: [2]int32{-1, -1}})
	}
	p.slots[key] = id
	return id
}

// place puts slot id in (or moves it within, or takes it out of) clock c's
// heap according to its due time. A timer moved later keeps its heap entry
// where it is: the entry is corrected when it reaches the top (due), so the
// common move — a key re-arming its timer on every input — costs no heap
// work on the input's path.
func (p *Part) place(id int32, c int) {
	s := &p.keys[id]
	switch {
	case s.due[c] == noDue && s.pos[c] >= 0:
		p.heapRemove(c, s.pos[c])
	case s.due[c] == noDue:
	case s.pos[c] < 0:
		p.heaps[c] = append(p.heaps[c], hent{at: s.due[c], slot: id})
		s.pos[c] = int32(len(p.heaps[c]) - 1)
		p.up(c, int(s.pos[c]))
	case s.due[c] < p.heaps[c][s.pos[c]].at:
		p.heaps[c][s.pos[c]].at = s.due[c]
		p.up(c, int(s.pos[c]))
	}
}

// Handled notes that the tick sent for key has been handled: the key is
// looked at again (set, called with what the tick left, comes first; a key
// whose timers all fired has left the index there). It reports whether the
// partition should be looked at now: its last look left due keys behind and
// its ticks in flight have fallen to half the batch, so the next batch is
// sent while the rest of this one is still queued, and no partition's input
// has more than a batch of ticks ahead of it.
func (p *Part) Handled(key string) (refill bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.slots[key]; ok && p.keys[id].sentMs != 0 {
		p.land(id)
	}
	if p.more && p.nFlying <= p.refillAt {
		p.more = false // one wake per batch; the look that follows sets it again
		return true
	}
	return false
}

// land ends slot id's flight and puts it back in the heaps.
func (p *Part) land(id int32) {
	p.keys[id].sentMs = 0
	p.nFlying--
	for c := range 2 {
		p.place(id, c)
	}
}

// Due takes up to budget keys due by streamMs (stream clock) and wallMs
// (wall clock) out of the heaps, marks their ticks in flight at nowMs, and
// returns them. Ticks in flight since before resendBefore count as lost
// (sent to a previous owner of the partition, or failed) and their keys are
// due again. The second result is how many keys it read.
//
// A refill (refill true) sends no key twice between two looks: a handler
// that re-arms its timer in the past is due again at once, and would
// otherwise fire as fast as the partition can go; it waits for the next look
// (and so do the keys behind it), as before there were refills.
func (p *Part) Due(streamMs, wallMs, nowMs, resendBefore int64, batch int, refill bool) (keys []string, read int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !refill {
		p.look++
	}
	// Lost ticks: the oldest flights first. Flights of handled or removed
	// keys are dropped on the way.
	n := 0
	for ; n < len(p.flights); n++ {
		f := p.flights[n]
		s := &p.keys[f.slot]
		if s.gen != f.gen || s.sentMs != f.sentMs {
			continue // handled, resent or removed since
		}
		if f.sentMs > resendBefore {
			break
		}
		read++
		p.land(f.slot)
	}
	p.flights = p.flights[n:]
	if len(p.flights) > 2*p.nFlying+64 {
		p.compactFlights()
	}
	bounds := [2]int64{streamMs, wallMs}
	// Entries of timers moved later are corrected as they come up, at most
	// maxFixes per look, so a look never holds the partition's index long
	// (after a jump of stream time, say); the rest wait.
	fixes, maxFixes := 0, max(4*batch, minTimerFixes)
	p.more, p.refillAt = false, batch/2
	for c := range 2 {
		h := &p.heaps[c]
		for len(*h) > 0 && p.nFlying < batch && fixes < maxFixes {
			top := (*h)[0]
			if top.at > bounds[c] {
				break
			}
			id := top.slot
			s := &p.keys[id]
			if s.due[c] > top.at { // moved later since: put it where it belongs
				(*h)[0].at = s.due[c]
				p.down(c, 0)
				fixes++
				continue
			}
			if refill && s.look == p.look {
				break // sent since the last look: its next tick waits for the next look
			}
			read++
			for cc := range 2 {
				if s.pos[cc] >= 0 {
					p.heapRemove(cc, s.pos[cc])
				}
			}
			s.look = p.look
			s.sentMs = nowMs
			p.nFlying++
			p.flights = append(p.flights, flight{slot: id, gen: s.gen, sentMs: nowMs})
			keys = append(keys, s.key)
		}
		if len(*h) > 0 && (*h)[0].at <= bounds[c] && (!refill || p.keys[(*h)[0].slot].look != p.look) {
			p.more = true
		}
	}
	return keys, read
}

// minTimerFixes is the least number of moved-later heap entries a look
// corrects per partition (four default batches when the default was 2,000):
// keys that re-arm their timers on every input, as the debouncer's do, need
// their entries corrected at the rate their old times pass, whatever the
// batch of ticks.
const minTimerFixes = 8000

func (p *Part) compactFlights() {
	kept := p.flights[:0]
	for _, f := range p.flights {
		if s := &p.keys[f.slot]; s.gen == f.gen && s.sentMs == f.sentMs {
			kept = append(kept, f)
		}
	}
	p.flights = append([]flight(nil), kept...)
}

// hasStream reports whether any key waits on the stream clock (so the look
// needs the partition's stream time).
func (p *Part) hasStream() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.heaps[clockStream]) > 0
}

// Size is the number of keys indexed.
func (p *Part) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.slots)
}

// less orders a clock's heap by due time, then key, so keys due together
// are sent ticks in the same order every time.
func (p *Part) less(c, i, j int) bool {
	h := p.heaps[c]
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return p.keys[h[i].slot].key < p.keys[h[j].slot].key
}

func (p *Part) swap(c, i, j int) {
	h := p.heaps[c]
	h[i], h[j] = h[j], h[i]
	p.keys[h[i].slot].pos[c] = int32(i)
	p.keys[h[j].slot].pos[c] = int32(j)
}

func (p *Part) up(c, i int) bool {
	moved := false
	for i > 0 {
		parent := (i - 1) / 2
		if !p.less(c, i, parent) {
			break
		}
		p.swap(c, i, parent)
		i, moved = parent, true
	}
	return moved
}

func (p *Part) down(c, i int) {
	n := len(p.heaps[c])
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && p.less(c, r, l) {
			m = r
		}
		if !p.less(c, m, i) {
			return
		}
		p.swap(c, i, m)
		i = m
	}
}

func (p *Part) heapRemove(c int, at int32) {
	h := p.heaps[c]
	i, last := int(at), len(h)-1
	removed := h[i].slot
	if i != last {
		p.swap(c, i, last)
	}
	p.heaps[c] = h[:last]
	p.keys[removed].pos[c] = -1
	if i != last {
		if !p.up(c, i) {
			p.down(c, i)
		}
	}
}

// Index is a processor's due-time index: one Part per partition
// it processes.
type Index struct {
	table string // the group table topic: only its stores are indexed
	log   *slog.Logger

	mu     sync.RWMutex
	parts  map[int32]*Part
	active map[int32]bool // the current assignment (Goka's rebalance callback)

	// wake asks the timer driver to look at the partitions whose refill is
	// set (Index.handled); capacity 1, sent to without blocking.
	wake chan struct{}

	// Counters the timer driver keeps and the tests and benchmarks read
	// (Processor.TimerStats): looks, refills, keys read by looks, ticks
	// sent, partition indexes built.
	Looks, Refills, KeysRead, TicksSent, Rebuilt atomic.Int64

	// Restore, when set, receives a recovered partition's stream time: the
	// highest its envelopes recorded (Envelope.stream_ms), read by the same
	// scan, before the partition's first record.
	Restore func(p int32, ms int64)
}

func New(table string, log *slog.Logger) *Index {
	return &Index{table: table, log: log, parts: map[int32]*Part{}, active: map[int32]bool{}, wake: make(chan struct{}, 1)}
}

// Assigned records the partitions this instance processes from now on (a
// rebalance); hot standbys are not among them and are never indexed.
func (x *Index) Assigned(parts map[int32]int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.active = make(map[int32]bool, len(parts))
	for p := range parts {
		x.active[p] = true
	}
}

func (x *Index) part(p int32) *Part {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.parts[p]
}

// Partitions returns the installed partitions' indexes.
func (x *Index) Partitions() map[int32]*Part {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[int32]*Part, len(x.parts))
	for p, pt := range x.parts {
		out[p] = pt
	}
	return out
}

// Set and Remove keep the index of partition p after a write of key's
// envelope; a partition that is not installed is not processed here.
func (x *Index) Set(p int32, key string, timers []*kitpb.Timer) {
	if pt := x.part(p); pt != nil {
		pt.Set(key, timers)
	}
}

func (x *Index) Remove(p int32, key string) {
	if pt := x.part(p); pt != nil {
		pt.Remove(key)
	}
}

// Handled notes that the tick of key on partition p was handled, and wakes
// the timer driver (without waiting) if the partition's next batch is due.
func (x *Index) Handled(p int32, key string) {
	if pt := x.part(p); pt != nil && pt.Handled(key) {
		pt.refill.Store(true)
		select {
		case x.wake <- struct{}{}:
		default: // a wake is pending already; it looks at every partition asking
		}
	}
}

// RefillAsked reports whether a partition waits for a refill.
func (x *Index) RefillAsked() bool {
	for _, pt := range x.Partitions() {
		if pt.refill.Load() {
			return true
		}
	}
	return false
}

// StorageBuilder wraps the group table's stores so each partition's index is
// built from its store once it has recovered, and dropped when it closes.
func (x *Index) StorageBuilder(inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil || topic != x.table {
			return st, err
		}
		return &indexedStorage{Storage: st, idx: x, partition: partition}, nil
	}
}

// indexedStorage is a partition's store of the group table that builds the
// partition's timer index when Goka marks it recovered.
type indexedStorage struct {
	storage.Storage
	idx       *Index
	partition int32
	// mu orders the scan and Close: Goka runs MarkRecovered in a goroutine
	// it may stop waiting for (a rebalance), and may close the store while
	// it runs.
	mu     sync.Mutex
	closed bool
	built  *Part
}

func (s *indexedStorage) MarkRecovered() error {
	if err := s.Storage.MarkRecovered(); err != nil {
		return err
	}
	x := s.idx
	x.mu.RLock()
	active := x.active[s.partition]
	x.mu.RUnlock()
	if !active {
		return nil // a hot standby or recover-ahead copy: nothing fires here
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	// Goka starts the partition's callbacks only after this returns, so no
	// write of the partition's envelopes races the scan.
	pt, n, bad, err := scanTimers(s.Storage)
	if err != nil {
		return fmt.Errorf("building the timer index of partition %d: %w", s.partition, err)
	}
	if bad > 0 {
		x.log.Warn("timer index: table values that are not envelopes were skipped", "partition", s.partition, "values", bad)
	}
	x.mu.Lock()
	x.parts[s.partition] = pt
	x.mu.Unlock()
	if x.Restore != nil {
		x.Restore(s.partition, pt.streamMs)
	}
	s.built = pt
	x.Rebuilt.Add(1)
	x.log.Debug("timer index built", "partition", s.partition, "keys_scanned", n, "keys_with_timers", pt.Size())
	return nil
}

func (s *indexedStorage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.built != nil {
		x := s.idx
		x.mu.Lock()
		if x.parts[s.partition] == s.built {
			delete(x.parts, s.partition)
		}
		x.mu.Unlock()
		s.built = nil
	}
	return s.Storage.Close()
}

// scanTimers builds a partition's index from every value of its store, and
// finds the highest stream time its envelopes recorded (pt.streamMs). It
// reads only the envelopes' timers (field 5) and stream time (field 6), not
// the state, cursors or outputs.
func scanTimers(st storage.Storage) (pt *Part, n, bad int, err error) {
	it, err := st.Iterator()
	if err != nil {
		return nil, 0, 0, err
	}
	defer it.Release()
	pt = NewPart()
	for it.Next() {
		key := it.Key()
		if string(key) == offsetStorageKey {
			continue
		}
		v, err := it.Value()
		if err != nil {
			return nil, n, bad, fmt.Errorf("reading %q: %w", key, err)
		}
		n++
		due, ok, streamMs, err := envelopeScan(v)
		if err != nil {
			bad++
			continue
		}
		pt.streamMs = max(pt.streamMs, streamMs)
		if ok {
			pt.setLocked(string(key), due, true)
		}
	}
	return pt, n, bad, it.Err()
}

// offsetStorageKey is where Goka's stores (and statestore's) keep the
// table offset; it is not a key of the table.
const offsetStorageKey = "__offset"

// envelopeDue reads the earliest due time per clock of an encoded envelope's
// timers without decoding the rest. Values it does not recognise byte by byte
// are decoded in full.
func envelopeDue(v []byte) (due [2]int64, ok bool, err error) {
	due, ok, _, err = envelopeScan(v)
	return due, ok, err
}

// envelopeScan is envelopeDue that also reads the envelope's stream time.
func envelopeScan(v []byte) (due [2]int64, ok bool, streamMs int64, err error) {
	if !tablecodec.Enveloped(v) {
		env, err := tablecodec.Decode(v)
		if err != nil {
			return due, false, 0, err
		}
		due, ok = earliest(env.GetTimers())
		return due, ok, env.GetStreamMs(), nil
	}
	due = [2]int64{noDue, noDue}
	b := v[len(tablecodec.Magic):]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return due, false, 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 6 && typ == protowire.VarintType { // Envelope.stream_ms
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return due, false, 0, protowire.ParseError(n)
			}
			b = b[n:]
			streamMs = max(streamMs, int64(x))
			continue
		}
		if num == 5 && typ == protowire.BytesType { // Envelope.timers
			t, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return due, false, 0, protowire.ParseError(n)
			}
			b = b[n:]
			at, kind, err := timerFields(t)
			if err != nil {
				return due, false, 0, err
			}
			if c, known := clockOf(kind); known {
				due[c], ok = min(due[c], at), true
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return due, false, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return due, ok, streamMs, nil
}

// timerFields reads at_ms (2) and kind (3) of an encoded kitpb.Timer.
func timerFields(b []byte) (at int64, kind kitpb.TimerKind, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == 2 || num == 3) {
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, protowire.ParseError(n)
			}
			b = b[n:]
			if num == 2 {
				at = int64(x)
			} else {
				kind = kitpb.TimerKind(int32(x))
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return at, kind, nil
}

// Wake receives when a handled tick asks for a partition's next batch (see
// Handled): the timer driver then looks at the partitions whose refill is set.
func (x *Index) Wake() <-chan struct{} { return x.wake }

// Install makes pt the index of partition p, as a recovered store does
// (benchmarks build an index by hand).
func (x *Index) Install(p int32, pt *Part) {
	x.mu.Lock()
	x.parts[p] = pt
	x.mu.Unlock()
}

// TakeRefill reports whether a handled tick asked for this partition's next
// batch since the last call, and clears the request.
func (p *Part) TakeRefill() bool { return p.refill.Swap(false) }
