package once

import (
	"hash/fnv"
	"strconv"
	"sync"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Deferred advances: a callback on an unordered input that emitted without
// changing the key's state or timers (a hop that only routes) does not
// rewrite the key's envelope — the whole state, for one cursor step and its
// outputs. Its advance is kept in memory and written with the key's next
// write.
//
// Invariant: while a partition is processed here, a key's stored envelope
// with its deferred advances applied in order is exactly what writing every
// callback would have stored; every callback reads it so (Deferred.Apply),
// so replays within the process are decided as before. What a crash or a
// rebalance loses is only advances of inputs applied after the key's last
// write, on the state that write stored: redelivered, such an input is new
// to the stored cursor and runs again on that same state, which emits the
// same records (the handler's determinism the kit already relies on for
// keys without an envelope). An advance is recorded instead of deferred when
// the input is ordered (its HLC and digest are what recognise a copy of it
// produced again, at a new offset, after a restart), when the key already
// has window-1 deferred, or when the partition has MaxDeferred.
//
// A deferred advance whose input's offset the group has committed cannot be
// redelivered, so it is dropped (as trim would drop it from the envelope).
// Advances are dropped too when the stored envelope is not the one they were
// deferred on (another instance wrote the key while it held the partition):
// the store then knows better.

// MaxDeferred bounds the deferred advances of one partition (beyond it,
// callbacks write as before).
const MaxDeferred = 8192

// Deferred is a group's deferred advances, per partition and key. Its zero
// value is ready; callbacks of different partitions meet at the lock.
type Deferred struct {
	mu    sync.Mutex
	parts map[int32]*deferredPart
}

type deferredPart struct {
	keys map[string]*deferredKey
	fifo []deferredRef // arrival order, for dropping what is committed
	head int           // fifo[:head] is done with
	live int
}

type deferredKey struct {
	base    uint64 // Print of the stored envelope they were deferred on
	entries []*deferredAdvance
}

type deferredAdvance struct {
	in      Input // unordered: Offset is all of its position
	outputs []*kitpb.Output
	dropped bool
}

type deferredRef struct {
	key string
	a   *deferredAdvance
}

// Print identifies a stored envelope well enough to tell that another
// writer changed it: every write follows an input (a cursor moves), changes
// the state or the timers.
func Print(env *kitpb.Envelope) uint64 {
	h := fnv.New64a()
	var b []byte
	b = strconv.AppendInt(b, int64(len(env.GetState())), 10)
	b = strconv.AppendBool(b, env.GetHasState())
	b = strconv.AppendInt(b, int64(len(env.GetTimers())), 10)
	for _, c := range env.GetCursors() {
		b = append(b, c.GetTopic()...)
		b = strconv.AppendInt(append(b, 0), int64(c.GetPartition()), 10)
		b = strconv.AppendInt(append(b, 0), c.GetOffset(), 10)
		b = strconv.AppendInt(append(b, 0), int64(len(c.GetPending())), 10)
	}
	h.Write(b)
	return max(h.Sum64(), 1) // 0: none
}

// Apply adds the key's deferred advances to env, the envelope as stored (nil:
// none), dropping them when env is not the one they were deferred on. It
// returns the print of env as stored when it applied any, else 0.
func (d *Deferred) Apply(partition int32, key string, env *kitpb.Envelope) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.parts[partition]
	if p == nil {
		return 0
	}
	k := p.keys[key]
	if k == nil {
		return 0
	}
	if env == nil || Print(env) != k.base || !ahead(env, k.entries) {
		p.drop(key, k)
		return 0
	}
	for _, a := range k.entries {
		Advance(env, a.in, key, a.outputs)
	}
	return k.base
}

// ahead reports whether every advance is beyond its cursor in env (advance
// would otherwise take it for offsets that started over).
func ahead(env *kitpb.Envelope, entries []*deferredAdvance) bool {
	first := entries[0].in
	one := true // the usual case: every advance is of one input partition
	for _, a := range entries[1:] {
		one = one && a.in.Topic == first.Topic && a.in.Partition == first.Partition
	}
	if one {
		c := CursorOf(env, first.Topic, first.Partition)
		return c == nil || first.Offset > c.GetOffset()
	}
	last := map[string]int64{}
	for _, a := range entries {
		id := a.in.Topic + "\x00" + strconv.Itoa(int(a.in.Partition))
		prev, ok := last[id]
		if !ok {
			prev = -1
			if c := CursorOf(env, a.in.Topic, a.in.Partition); c != nil {
				prev = c.GetOffset()
			}
		}
		if a.in.Offset <= prev {
			return false
		}
		last[id] = a.in.Offset
	}
	return true
}

// Add defers the advance of in, an applied unordered input that emitted
// outputs, for the key whose stored envelope has print base, and reports
// whether it did (false: write it). The key keeps at most b.Window-1.
func (d *Deferred) Add(key string, base uint64, in Input, outputs []*kitpb.Output, b Bounds) bool {
	partition, a := in.Partition, &deferredAdvance{in: in, outputs: outputs}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.parts == nil {
		d.parts = map[int32]*deferredPart{}
	}
	p := d.parts[partition]
	if p == nil {
		p = &deferredPart{keys: map[string]*deferredKey{}}
		d.parts[partition] = p
	}
	p.prune(b)
	k := p.keys[key]
	if k != nil && k.base != base {
		p.drop(key, k) // cannot happen: apply dropped them on this load
		k = nil
	}
	if p.live >= MaxDeferred || (k != nil && len(k.entries) >= b.Window-1) {
		return false
	}
	if k == nil {
		k = &deferredKey{base: base}
		p.keys[key] = k
	}
	k.entries = append(k.entries, a)
	p.fifo = append(p.fifo, deferredRef{key: key, a: a})
	p.live++
	return true
}

// Written forgets the key's deferred advances: the key's write holds them.
func (d *Deferred) Written(partition int32, key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.parts[partition]; p != nil {
		if k := p.keys[key]; k != nil {
			p.drop(key, k)
		}
	}
}

func (p *deferredPart) drop(key string, k *deferredKey) {
	for _, a := range k.entries {
		a.dropped = true
	}
	p.live -= len(k.entries)
	delete(p.keys, key)
}

// prune drops, oldest first, the advances whose input the group has
// committed, and the references to advances already dropped.
func (p *deferredPart) prune(b Bounds) {
	for ; p.head < len(p.fifo); p.head++ {
		r := p.fifo[p.head]
		if r.a.dropped {
			continue
		}
		next, known := b.committed(r.a.in.Topic, r.a.in.Partition)
		if !known || r.a.in.Offset >= next {
			break
		}
		// The oldest live reference is its key's oldest advance.
		if k := p.keys[r.key]; k != nil && len(k.entries) > 0 && k.entries[0] == r.a {
			k.entries = k.entries[1:]
			if len(k.entries) == 0 {
				delete(p.keys, r.key)
			}
		}
		r.a.dropped = true
		p.live--
	}
	if p.head > 1024 && p.head > len(p.fifo)/2 {
		p.fifo = append(p.fifo[:0], p.fifo[p.head:]...)
		p.head = 0
	}
	if len(p.fifo)-p.head > 2*p.live+1024 { // dropped references behind a live head
		keep := p.fifo[:0]
		for _, r := range p.fifo[p.head:] {
			if !r.a.dropped {
				keep = append(keep, r)
			}
		}
		p.fifo, p.head = keep, 0
	}
}
