package group

import (
	"sync"
	"time"

	"github.com/fencestream/fencestream/codecs"
)

// EventTime declares that at(msg) is the input's event time. The kit then keeps
// the stream time of each input partition — the highest event time applied on
// it — which stream-time timers (and windows, and state TTL) wait for, and
// Context.EventTime returns it. Default: the stream carries no event time and
// does not move stream time.
func EventTime[M any, PM codecs.Message[M]](at func(PM) time.Time) StreamOpt[M, PM] {
	return func(c *streamConfig[M, PM]) { c.eventTime, c.eventTimeSet = at, true }
}

// streamClock holds the stream time of the partitions this instance processes.
// Every envelope the instance writes records its partition's stream time
// (Envelope.stream_ms); when a partition has recovered, before its first
// record, its stream time is restored to the highest of its envelopes
// (restore, from the timer index's scan), so a restart or a takeover changes
// no verdict on lateness. A group without timers keeps no index: its stream
// time starts unknown (0) after a restart (it has no window, join or TTL to
// judge).
type streamClock struct {
	mu    sync.Mutex
	parts map[int32]*partitionClock
	// idle: a partition that processed no record for this long (wall clock)
	// has its stream time advanced to the wall clock; 0 never.
	idle time.Duration
	// restored: the stream time a recovered partition's envelopes recorded,
	// for a partition whose clock is not created yet (restore).
	restored map[int32]int64
}

type partitionClock struct {
	watermarkMs int64     // highest event time applied (clamped to the wall clock)
	lastWall    time.Time // wall time of the last record, or of the first look
}

func newStreamClock(idle time.Duration) *streamClock {
	return &streamClock{parts: map[int32]*partitionClock{}, idle: idle, restored: map[int32]int64{}}
}

// observe moves partition p's stream time to eventMs if that is later. An
// event time ahead of the wall clock counts only up to the wall clock: one
// device with a fast clock must not make every other key of its partition look
// silent.
func (s *streamClock) observe(p int32, eventMs int64, wall time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.part(p, wall)
	pc.watermarkMs = max(pc.watermarkMs, min(eventMs, wall.UnixMilli()))
	pc.lastWall = wall
}

// part returns partition p's clock, created at wall (the first look counts as
// activity, so a partition is idle only after a full idle period); s.mu held.
func (s *streamClock) part(p int32, wall time.Time) *partitionClock {
	pc := s.parts[p]
	if pc == nil {
		pc = &partitionClock{lastWall: wall, watermarkMs: s.restored[p]}
		s.parts[p] = pc
		delete(s.restored, p)
	}
	return pc
}

// touch notes a record on p without event time: the partition is busy.
func (s *streamClock) touch(p int32, wall time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part(p, wall).lastWall = wall
}

// now is partition p's stream time in Unix milliseconds, as timers see it at
// wall time wall: the watermark, or the wall clock once the partition has been
// idle for the configured time. A partition catching up on a backlog is never
// idle, so its stream time follows the backlog's event time and no timer fires
// ahead of the records that would have cancelled it.
func (s *streamClock) now(p int32, wall time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.part(p, wall)
	if s.idle > 0 && wall.Sub(pc.lastWall) >= s.idle {
		pc.watermarkMs = max(pc.watermarkMs, wall.UnixMilli())
	}
	return pc.watermarkMs
}

// StreamTime is the stream time the handler runs at: in a timer handler, the
// stream time recorded in the tick that fired it (so a replay sees the same);
// otherwise the stream time of the input's partition, including this record.
// Zero while the partition's stream time is unknown (no input with event time
// since the instance started, and none recorded in the partition's stored
// envelopes: see streamClock). It decides when; what a handler writes should
// come from the record (EventTime) or the timer (Timer.At).
func (c *Context[S, PS]) StreamTime() time.Time {
	if c.rec.tick != nil {
		return time.UnixMilli(c.rec.tick.GetStreamMs())
	}
	return time.UnixMilli(c.grp.clock.now(c.Partition(), c.grp.rt.now()))
}

// EventTime is the input's event time as its stream declares it (EventTime),
// the due time of the timer being fired in a timer handler, or the zero time.
func (c *Context[S, PS]) EventTime() time.Time { return c.rec.eventTime }

// raise moves partition p's stream time to ms if that is later, without
// counting as activity: a key's state remembers a stream time the partition
// reached before this instance started.
func (s *streamClock) raise(p int32, ms int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := s.parts[p]
	if pc == nil {
		return // a clock is created by the first record or look, at its wall time
	}
	pc.watermarkMs = max(pc.watermarkMs, ms)
}

// restore moves partition p's stream time to ms, the highest stream time its
// stored envelopes recorded, when the partition has recovered. It reads no
// clock: a partition's clock not created yet starts from ms when its first
// record or look creates it (at that wall time, for idleness).
func (s *streamClock) restore(p int32, ms int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.parts[p]; pc != nil {
		pc.watermarkMs = max(pc.watermarkMs, ms)
		return
	}
	s.restored[p] = max(s.restored[p], ms)
}

// watermark is partition p's stream time as last moved (by records, an idle
// look or a restore), without judging idleness: what an envelope records.
func (s *streamClock) watermark(p int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.parts[p]; pc != nil {
		return pc.watermarkMs
	}
	return s.restored[p]
}
