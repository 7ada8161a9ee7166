package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
	"github.com/fencestream/fencestream/topology/produce"
)

// simState is DATA/sim.json: where the simulated fleet stopped, so the next run
// continues every device's timeline (same route position, later event time,
// higher HLC) instead of starting the routes over.
type simState struct {
	Seed       int64   `json:"seed"`
	Moving     int     `json:"moving"`
	Parked     int     `json:"parked"`
	IntervalMs int64   `json:"interval_ms"`
	NoiseM     float64 `json:"noise_m"`
	// Fences fingerprints the fence set the routes were drawn over.
	Fences string `json:"fences"`
	// StartMs is the event time of tick 0 in the last run.
	StartMs int64 `json:"start_ms"`
	// NextTick is the first tick the next run sends.
	NextTick int64 `json:"next_tick"`
	// LastHLC is the highest HLC the last run stamped; the next run's clock
	// observes it, so every device's HLC keeps increasing.
	LastHLC uint64 `json:"last_hlc"`
	SavedAt string `json:"saved_at"`
}

func (s simState) sameFleet(o simState) bool {
	return s.Seed == o.Seed && s.Moving == o.Moving && s.Parked == o.Parked &&
		s.IntervalMs == o.IntervalMs && s.NoiseM == o.NoiseM && s.Fences == o.Fences
}

func loadSimState(path string) (simState, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return simState{}, false, nil
	}
	if err != nil {
		return simState{}, false, err
	}
	var s simState
	if err := json.Unmarshal(data, &s); err != nil {
		return simState{}, false, fmt.Errorf("%s is unreadable (%v); delete it to start the fleet over", path, err)
	}
	return s, true, nil
}

func saveSimState(path string, s simState) error {
	s.SavedAt = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// fingerprint identifies a fence set: routes drawn over other fences differ.
func fingerprint(fs []fences.Fence) string {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b fences.Fence) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	h := sha256.New()
	for i := range fs {
		h.Write([]byte(fs[i].ID))
		h.Write([]byte{0})
		h.Write(fences.AppendGeoJSON(nil, fs[i].Geometry))
		h.Write([]byte(strconv.FormatFloat(fs[i].RadiusM, 'g', -1, 64)))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// simulator feeds the pings topic with the fleet in real time.
type simulator struct {
	o    *options
	topo *topology.Topology
	log  *slog.Logger
	// cat is filled by the process's fence follower; catReady closes when
	// it caught up.
	cat      *fences.Catalogue
	catReady <-chan struct{}

	sent atomic.Int64 // pings the broker acknowledged
}

func newSimulator(o *options, topo *topology.Topology, cat *fences.Catalogue, catReady <-chan struct{}, log *slog.Logger) *simulator {
	return &simulator{o: o, topo: topo, cat: cat, catReady: catReady, log: log}
}

// Sent is the number of pings delivered so far.
func (s *simulator) Sent() int64 { return s.sent.Load() }

// catalogue waits for the process's fence catalogue to catch up with the
// fences topic, to route the fleet through it. Shared with the processors,
// so an invalid fence record is reported once, by its follower.
func (s *simulator) catalogue(ctx context.Context) ([]fences.Fence, error) {
	select {
	case <-s.catReady:
		return s.cat.Snapshot().All(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *simulator) run(ctx context.Context) error {
	fs, err := s.catalogue(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("simulator: %w", err)
	}
	if len(fs) == 0 {
		s.log.Warn("no fences in the catalogue; the simulator is idle (load some with fencectl fences load)")
		<-ctx.Done()
		return nil
	}
	interval := max(time.Millisecond, time.Duration(float64(time.Second)/s.o.rate)).Truncate(time.Millisecond)
	want := simState{
		Seed: s.o.seed, Moving: s.o.devices, Parked: s.o.parked,
		IntervalMs: interval.Milliseconds(), NoiseM: s.o.noise, Fences: fingerprint(fs),
	}
	prev, found, err := loadSimState(s.o.simFile())
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	now := time.Now()
	resume := int64(0)
	// On a first start the fleet has been out for --sim-warmup already: its
	// event time starts that long ago and that backlog is sent at once, so
	// the first triggers show within seconds instead of minutes (moving
	// devices wait fleet.DefaultMinGap before they drive, and a fence
	// confirms only after its minimum dwell). Not after a change of fleet
	// settings: a device's event time must not go back.
	warm := int64(0)
	if !found {
		warm = int64(s.o.simWarmup / interval)
	}
	start := now.Add(-time.Duration(warm) * interval)
	if found && prev.sameFleet(want) {
		resume = prev.NextTick
		start = now.Add(-time.Duration(resume) * interval)
		// Event time never goes backwards, even if the wall clock did.
		if prevStart := time.UnixMilli(prev.StartMs); start.Before(prevStart) {
			start = prevStart
		}
		s.log.Info("resuming the fleet where it stopped", "tick", resume, "stopped", prev.SavedAt)
	} else if found {
		s.log.Info("fleet settings or fences changed; devices start new timelines", "file", s.o.simFile())
	}
	sim, err := fleet.New(fleet.Config{
		Seed: s.o.seed, Moving: s.o.devices, Parked: s.o.parked,
		NoiseSigmaM: s.o.noise, Interval: interval, Start: start,
	}, fs)
	if err != nil {
		return fmt.Errorf("simulator: %w (run with --no-sim to go without it)", err)
	}
	clock := hlc.New(nil)
	if found {
		clock.Observe(prev.LastHLC)
	}
	prod, err := produce.New[pb.Ping](s.o.cl, s.topo.MustTopic(geofence.TopicPings),
		produce.HLC(clock), produce.Logger(s.log))
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	state := want
	state.StartMs = start.UnixMilli()
	state.NextTick = resume
	var nextTick atomic.Int64
	nextTick.Store(resume)
	save := func() {
		st := state
		st.NextTick = nextTick.Load()
		st.LastHLC = clock.Last()
		if err := saveSimState(s.o.simFile(), st); err != nil {
			s.log.Warn("saving the simulator's position failed", "file", s.o.simFile(), "err", err)
		}
	}
	s.log.Info("simulating", "devices", s.o.devices, "parked", s.o.parked, "interval", interval, "seed", s.o.seed, "from_tick", resume,
		"warmup", time.Duration(warm)*interval)

	err = s.stream(ctx, sim, prod, resume, warm, &nextTick, save)
	if cerr := prod.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("simulator: closing producer: %w", cerr)
	}
	save()
	return err
}

// stream sends ticks resume, resume+1, ... until ctx ends: the first warm
// of them at once, then in real time (tick resume+warm now, each next one an
// interval later).
func (s *simulator) stream(ctx context.Context, sim *fleet.Sim, prod *produce.Producer[pb.Ping, *pb.Ping],
	resume, warm int64, nextTick *atomic.Int64, save func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := sim.Config()
	startMs, intervalMs := cfg.Start.UnixMilli(), cfg.Interval.Milliseconds()
	waits := make(chan func() error, 8192)
	var (
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	wg.Go(func() {
		for w := range waits {
			if err := w(); err != nil {
				fail(err)
				continue
			}
			s.sent.Add(1)
		}
	})
	wg.Go(func() { // persist the position now and then, not only at a clean stop
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				save()
			}
		}
	})
	wall0 := time.Now()
	cur := int64(-1)
	timer := time.NewTimer(0)
	defer timer.Stop()
	err := sim.Stream(ctx, func(p *pb.Ping) bool {
		tick := (p.GetDeviceTimeMs() - startMs) / intervalMs
		if tick < resume {
			return true // already sent by an earlier run: advance the timeline only
		}
		if tick != cur {
			cur = tick
			due := wall0.Add(time.Duration(tick-resume-warm) * cfg.Interval)
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return false
				case <-timer.C:
				}
			}
		}
		wait, err := prod.EmitAsync(p.GetDeviceId(), p)
		if err != nil {
			fail(fmt.Errorf("simulator: %w", err))
			return false
		}
		nextTick.Store(tick + 1)
		select {
		case waits <- wait:
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(waits)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
