package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
)

// TimerFigures: the recovered debouncer's seeded silence timers (due in
// device order, all before the wall clock) made due by pings that move each
// partition's stream time past them. A timer's firing is seen as the TIMEOUT
// exit it emits, read from the triggers topic.
type TimerFigures struct {
	IntervalSeconds float64 `json:"interval_s"`
	// Probes timers are made due a few at a time (four steps, one ping per
	// partition each, at four phases of the timer interval). A timer's lateness runs from sending the ping that
	// made it due to reading its trigger, so it includes both records' trips
	// through the broker: an upper bound on due-to-fire.
	Probes      int     `json:"lateness_timers"`
	LatenessP50 float64 `json:"lateness_p50_s"`
	LatenessMax float64 `json:"lateness_max_s"`
	// Burst timers (every one left) are made due at once; BurstSeconds runs
	// from the pings that made them due to the last one's trigger read.
	Burst           int     `json:"burst_timers"`
	BurstSeconds    float64 `json:"burst_s"`
	BurstCPUSeconds float64 `json:"burst_cpu_s"`
	// TricklePings are pings of new devices sent at a steady rate from a
	// second before the burst until it is fired. InputStallMax is the longest
	// any partition had a ping acknowledged by the broker and none applied,
	// from the burst on; InputStallBefore the same in the second before it.
	TricklePings     int     `json:"trickle_pings"`
	InputStallMax    float64 `json:"input_stall_max_s"`
	InputStallBefore float64 `json:"input_stall_before_s"`
}

const (
	// trickleEvery and trickleBatch pace the trickle: 200 pings/s.
	trickleEvery = 10 * time.Millisecond
	trickleBatch = 2
	// stallPoll is how often the stall watch reads the applied offsets.
	stallPoll = 5 * time.Millisecond
)

// timerRun is what scaleTimers' parts share: the seeded devices' fire times
// (from their triggers), the pings sent and the highest offset the broker
// acknowledged per partition.
type timerRun struct {
	e      *env
	run    *running
	n      int
	baseMs int64
	enc    codecs.Proto[geofencepb.Ping, *geofencepb.Ping]

	mu    sync.Mutex
	fired map[int]time.Time // seeded device index → its trigger read
	acked map[int32]int64   // pings partition → highest acknowledged offset
	sent  atomic.Int64
	perr  atomic.Value // first produce error
}

// scaleTimers makes the seeded timers of the running debouncer due: Probes in
// three small steps to time a due timer's firing, then the rest at once while
// a trickle of pings measures how long input waits behind the burst. baseMs is
// what the envelopes were seeded with; their timers must all be due before
// the wall clock, and no partition's stream time may have reached them yet.
func (e *env) scaleTimers(ctx context.Context, run *running, n int, baseMs int64) (TimerFigures, error) {
	f := TimerFigures{IntervalSeconds: e.timerEvery.Seconds()}
	tr := &timerRun{e: e, run: run, n: n, baseMs: baseMs, enc: codecs.For[geofencepb.Ping](),
		fired: make(map[int]time.Time, n), acked: map[int32]int64{}}
	kopts, _ := e.cl.Kgo()
	tail, err := kgo.NewClient(append(kopts,
		kgo.ConsumeTopics(geofence.TopicTriggers),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond))...)
	if err != nil {
		return f, err
	}
	defer tail.Close()
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	go tr.tail(tctx, tail)

	// Lateness: four steps, each making the next devices in due order due.
	// A step starts right after the previous one's timers fired, so just
	// after a look; waiting a quarter interval more each time spreads the
	// steps over the phases of the look cycle instead of always hitting the
	// same one.
	per := max(1, min(1000, n/100))
	steps := min(4, n/per)
	var lat []time.Duration
	for s := 1; s <= steps; s++ {
		select {
		case <-time.After(time.Duration(s-1) * e.timerEvery / 4): // a phase, not a wait for a condition
		case <-ctx.Done():
			return f, ctx.Err()
		}
		upto := s*per - 1
		at := time.Now()
		if err := tr.pingEveryPartition(ctx, fmt.Sprintf("probe%d", s), seedDue(baseMs, upto)); err != nil {
			return f, err
		}
		if err := tr.waitFired(ctx, upto+1, stageLimit); err != nil {
			return f, fmt.Errorf("lateness step %d: %w", s, err)
		}
		tr.mu.Lock()
		for j := (s - 1) * per; j <= upto; j++ {
			lat = append(lat, tr.fired[j].Sub(at))
		}
		tr.mu.Unlock()
	}
	f.Probes = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		f.LatenessP50, f.LatenessMax = lat[len(lat)/2].Seconds(), lat[len(lat)-1].Seconds()
	}
	e.progress("timers: %d made due in %d steps fired %.2f s (p50) to %.2f s (max) after the ping that made them due, at a %v interval",
		f.Probes, steps, f.LatenessP50, f.LatenessMax, e.timerEvery)

	// Burst: the trickle's event time keeps stream time where the last step
	// left it; one ping per partition at the wall clock makes the rest due.
	held := seedDue(baseMs, steps*per-1)
	stall := &stallWatch{}
	sctx, scancel := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); tr.trickle(sctx, ctx, held) }()
	go func() { defer bg.Done(); stall.watch(sctx, tr) }()
	stopBackground := func() { scancel(); bg.Wait() }
	f.Burst = n - f.Probes
	e.progress("timers: %d falling due at once, with a trickle of %d pings/s", f.Burst, trickleBatch*int(time.Second/trickleEvery))
	select {
	case <-time.After(time.Second): // the trickle before the burst, for comparison
	case <-ctx.Done():
		stopBackground()
		return f, ctx.Err()
	}
	f.InputStallBefore = stall.restart().Seconds()
	at, c0 := time.Now(), cpu()
	if err := tr.pingEveryPartition(ctx, "burst", time.Now().UnixMilli()); err != nil {
		stopBackground()
		return f, err
	}
	// Firing costs ~0.3 ms of CPU per timer here (0.8 ms of wall per timer
	// at load 12 on 2 cores), so a million takes far longer than a stage.
	err = tr.waitFired(ctx, n, stageLimit+time.Duration(f.Burst)*time.Millisecond)
	f.BurstCPUSeconds = (cpu() - c0).Seconds()
	stopBackground()
	if err != nil {
		return f, fmt.Errorf("burst: %w", err)
	}
	tr.mu.Lock()
	var last time.Time
	for _, t := range tr.fired {
		if t.After(last) {
			last = t
		}
	}
	tr.mu.Unlock()
	f.BurstSeconds = last.Sub(at).Seconds()
	f.TricklePings = int(tr.sent.Load()) - (steps+1)*int(e.cfg.Partitions)
	f.InputStallMax = stall.max().Seconds()
	if perr, _ := tr.perr.Load().(error); perr != nil {
		return f, fmt.Errorf("producing pings: %w", perr)
	}
	return f, nil
}

// tail notes when each seeded device's first trigger is read.
func (tr *timerRun) tail(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		tr.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			if !strings.HasPrefix(k, "dev-") {
				return
			}
			j, err := strconv.Atoi(k[len("dev-"):])
			if err != nil {
				return
			}
			if _, ok := tr.fired[j]; !ok {
				tr.fired[j] = now
			}
		})
		tr.mu.Unlock()
	}
}

// waitFired waits until want seeded devices have fired, at most limit.
func (tr *timerRun) waitFired(ctx context.Context, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		tr.mu.Lock()
		got := len(tr.fired)
		tr.mu.Unlock()
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d timers fired after %v", got, want, limit)
		}
		select {
		case err := <-tr.run.errc:
			return fmt.Errorf("debouncer stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// pingEveryPartition sends one ping at event time ms to every pings
// partition, each for a new device (keys prefix-i), and waits for the acks.
func (tr *timerRun) pingEveryPartition(ctx context.Context, prefix string, ms int64) error {
	parts := tr.e.cfg.Partitions
	keys := make([]string, parts)
	left := int(parts)
	for i := 0; left > 0; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if p := topology.PartitionFor(k, parts); keys[p] == "" {
			keys[p] = k
			left--
		}
	}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		if err := tr.ping(ctx, k, ms, wg.Done); err != nil {
			return err
		}
	}
	wg.Wait()
	if perr, _ := tr.perr.Load().(error); perr != nil {
		return fmt.Errorf("producing pings: %w", perr)
	}
	return nil
}

// trickle sends trickleBatch pings of new devices every trickleEvery, at
// event time ms, until ctx ends. The pings are produced under pctx, so those
// still in flight then are not failed by the stop.
func (tr *timerRun) trickle(ctx, pctx context.Context, ms int64) {
	t := time.NewTicker(trickleEvery)
	defer t.Stop()
	for i := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range trickleBatch {
			if tr.ping(pctx, fmt.Sprintf("trickle-%d", i), ms, nil) != nil {
				return
			}
			i++
		}
	}
}

// ping produces one ping for device key at event time ms, noting its offset
// once acknowledged; done, if set, runs then.
func (tr *timerRun) ping(ctx context.Context, key string, ms int64, done func()) error {
	v, err := tr.enc.Marshal(&geofencepb.Ping{DeviceId: key, Lat: 1, Lon: 1, AccuracyM: 5, DeviceTimeMs: ms})
	if err != nil {
		return err
	}
	tr.sent.Add(1)
	tr.e.kc.Produce(ctx, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(key), Value: v}, func(r *kgo.Record, err error) {
		if err != nil {
			tr.perr.CompareAndSwap(nil, err)
		} else {
			tr.mu.Lock()
			tr.acked[r.Partition] = max(tr.acked[r.Partition], r.Offset)
			tr.mu.Unlock()
		}
		if done != nil {
			done()
		}
	})
	return nil
}

// stallWatch tracks, per pings partition, how long a ping has been waiting
// (acknowledged by the broker, not yet applied by the debouncer) with no ping
// applied, and keeps the longest.
type stallWatch struct {
	mu      sync.Mutex
	longest time.Duration
}

func (s *stallWatch) watch(ctx context.Context, tr *timerRun) {
	applied := map[int32]int64{}
	since := map[int32]time.Time{} // start of the current wait, if one is open
	t := time.NewTicker(stallPoll)
	defer t.Stop()
	for {
		_, last := tr.run.deb.Processed(geofence.TopicPings)
		now := time.Now()
		tr.mu.Lock()
		for p, ack := range tr.acked {
			prev, had := applied[p]
			if !had {
				prev = -1
			}
			off, seen := last[p]
			if !seen {
				off = prev // no stats for p this poll: nothing known moved
			}
			moved := off != prev
			applied[p] = off
			switch {
			case off >= ack:
				delete(since, p)
			case moved:
				since[p] = now // a ping was applied and more wait
			default:
				if _, open := since[p]; !open {
					since[p] = now
				}
			}
		}
		tr.mu.Unlock()
		s.mu.Lock()
		for _, from := range since {
			s.longest = max(s.longest, now.Sub(from))
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// restart returns the longest stall so far and starts over.
func (s *stallWatch) restart() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.longest
	s.longest = 0
	return l
}

func (s *stallWatch) max() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.longest
}
