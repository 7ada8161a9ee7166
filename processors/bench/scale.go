package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
)

// ScaleConfig sizes a scale run: a debouncer table of Devices real envelopes
// and a catalogue of Fences synthetic fences.
type ScaleConfig struct {
	Cluster cluster.Config // empty Brokers: embedded (see Config.Cluster)
	// Devices is the debouncer table's size (default 1,000,000).
	Devices int
	// Fences is the catalogue's size (default 100,000).
	Fences int
	// Idle is how long the recovered debouncer is watched doing nothing but
	// its timer looks (default 10 s: over 3 s the process's background work,
	// sarama's and Pebble's, read 0.020-0.041 cores where 10 s read 0.014).
	Idle time.Duration
	// LookEvery is the debouncer's timer interval here (default 1 s, so the
	// idle window sees looks; the debouncer's own default is 30 s).
	LookEvery  time.Duration
	Storage    statestore.Kind
	Partitions int32
	Progress   io.Writer
	StateDir   string
}

// CatalogueFigures: building the catalogue from Fences fences, and one
// fence moved in it.
type CatalogueFigures struct {
	Fences        int     `json:"fences"`
	LoadSeconds   float64 `json:"load_s"`
	HeapMB        float64 `json:"heap_mb"`
	UpdateSeconds float64 `json:"update_s"`
}

// RecoveryFigures: the debouncer started over the table.
type RecoveryFigures struct {
	Restart
	// RecordsPerSec is the cold start's restore throughput: changelog
	// records (one per device) over ColdSeconds.
	RecordsPerSec float64 `json:"restore_records_per_s"`
}

// IdleFigures: the recovered debouncer with every device's timer pending
// and no input, watched for Seconds.
type IdleFigures struct {
	Seconds float64 `json:"s"`
	// TimersIndexed is how many keys the due-time index holds.
	TimersIndexed int   `json:"timers_indexed"`
	Looks         int64 `json:"looks"`
	KeysRead      int64 `json:"keys_read"`
	// CPUFraction is the process's CPU (getrusage) over the window, in
	// cores; LookCPUMicros is that divided by the looks (an upper bound on a
	// look's cost, the idle runtime included).
	CPUFraction   float64 `json:"cpu_cores"`
	LookCPUMicros float64 `json:"look_cpu_us"`
}

// ViewFigures: a view of the debouncer's table with a state directory.
type ViewFigures struct {
	ColdSeconds float64 `json:"cold_s"`
	WarmSeconds float64 `json:"warm_s"`
	RSSMB       float64 `json:"rss_mb"`
}

// ScaleResult is one scale run.
type ScaleResult struct {
	CPUs       int             `json:"cpus"`
	Devices    int             `json:"devices"`
	Partitions int32           `json:"partitions"`
	Storage    statestore.Kind `json:"storage"`
	// Envelope is the seeded table values' mean size by part.
	Envelope      EnvelopeBytes    `json:"envelope_bytes"`
	ProduceSecond float64          `json:"produce_s"`
	Catalogue     CatalogueFigures `json:"catalogue"`
	Recovery      RecoveryFigures  `json:"recovery"`
	Idle          IdleFigures      `json:"idle"`
	Timers        TimerFigures     `json:"timers"`
	View          ViewFigures      `json:"view"`
	TotalSeconds  float64          `json:"total_s"`
}

// Scale builds the catalogue and the debouncer's table at size and measures
// what the size costs: the catalogue's load and update, the debouncer's cold
// and warm recovery, its idle timer looks, its timers' lateness and a burst of
// them falling due at once, and a view's cold and warm start.
func Scale(ctx context.Context, sc ScaleConfig) (*ScaleResult, error) {
	start := time.Now()
	if sc.Devices == 0 {
		sc.Devices = 1_000_000
	}
	if sc.Fences == 0 {
		sc.Fences = 100_000
	}
	if sc.Idle == 0 {
		sc.Idle = 10 * time.Second
	}
	if sc.LookEvery == 0 {
		sc.LookEvery = time.Second
	}
	if sc.Devices < 0 || sc.Fences < 0 || sc.Idle < 0 || sc.LookEvery < 0 {
		return nil, errors.New("bench scale: devices, fences, idle and look interval must not be negative")
	}
	cfg := Config{Cluster: sc.Cluster, Pings: 1, Devices: 1, Rates: []int{}, Partitions: sc.Partitions, Progress: sc.Progress,
		StateDir: sc.StateDir, Flush: -1, Storage: sc.Storage}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: quietLog, timerEvery: sc.LookEvery}
	cleanup, err := e.connect()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &ScaleResult{CPUs: runtime.NumCPU(), Devices: sc.Devices, Partitions: cfg.Partitions, Storage: cfg.Storage}

	e.progress("building a catalogue of %d fences", sc.Fences)
	if res.Catalogue, e.cat, err = scaleCatalogue(sc.Fences); err != nil {
		return nil, err
	}
	e.progress("catalogue: load %.2f s (+%.0f MB heap), one update %.4f s", res.Catalogue.LoadSeconds, res.Catalogue.HeapMB, res.Catalogue.UpdateSeconds)

	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	// The seeded timers are all due two minutes before the wall clock, but
	// stream time is unknown until a ping comes (and the debouncer's idle
	// stream time takes 10 minutes), so none fires until scaleTimers moves it.
	baseMs := t0.UnixMilli() - int64(sc.Devices) - seedDue(0, 0) - 120_000
	if res.Envelope, err = e.produceStates(ctx, sc.Devices, baseMs); err != nil {
		return nil, err
	}
	res.ProduceSecond = time.Since(t0).Seconds()
	e.progress("produced %d envelopes in %.1f s, %d bytes each (state %d, cursors %d, outputs %d, timers %d)", sc.Devices, res.ProduceSecond,
		res.Envelope.Total, res.Envelope.State, res.Envelope.Cursors, res.Envelope.Outputs, res.Envelope.Timers)

	// The view first, while the table holds only the seeded envelopes (the
	// timers' burst rewrites every one).
	if res.View, err = e.scaleView(ctx, sc.Devices); err != nil {
		return nil, err
	}
	e.progress("view: cold %.2f s, warm %.2f s, rss +%.0f MB", res.View.ColdSeconds, res.View.WarmSeconds, res.View.RSSMB)

	if res.Recovery, res.Idle, res.Timers, err = e.scaleRecovery(ctx, sc.Devices, sc.Idle, baseMs); err != nil {
		return nil, err
	}
	e.progress("debouncer: cold %.2f s (%.0f records/s), warm %.2f s, disk %.0f MB, rss +%.0f MB; idle %.3f cores, %d looks, %d keys read, %d timers indexed",
		res.Recovery.ColdSeconds, res.Recovery.RecordsPerSec, res.Recovery.WarmSeconds, res.Recovery.DiskMB, res.Recovery.RSSMB,
		res.Idle.CPUFraction, res.Idle.Looks, res.Idle.KeysRead, res.Idle.TimersIndexed)
	e.progress("timers: lateness p50 %.2f s, max %.2f s (%d timers); burst of %d fired in %.1f s (%.1f CPU s), longest input stall %.3f s (%.3f s before it) over %d trickle pings",
		res.Timers.LatenessP50, res.Timers.LatenessMax, res.Timers.Probes, res.Timers.Burst, res.Timers.BurstSeconds, res.Timers.BurstCPUSeconds,
		res.Timers.InputStallMax, res.Timers.InputStallBefore, res.Timers.TricklePings)
	res.TotalSeconds = time.Since(start).Seconds()
	return res, nil
}

// scaleCatalogue builds a catalogue of n synthetic fences and moves one.
func scaleCatalogue(n int) (CatalogueFigures, *fences.Catalogue, error) {
	f := CatalogueFigures{Fences: n}
	fs, err := fences.Synthetic(n, 1)
	if err != nil {
		return f, nil, err
	}
	runtime.GC()
	h0 := heap()
	t0 := time.Now()
	c := fences.New()
	if err := c.Apply(1, fs, nil); err != nil {
		return f, nil, err
	}
	f.LoadSeconds = time.Since(t0).Seconds()
	runtime.GC()
	f.HeapMB = float64(heap()-h0) / (1 << 20)
	moved, err := fences.SyntheticFence(0, 2)
	if err != nil {
		return f, nil, err
	}
	t0 = time.Now()
	if err := c.Apply(2, []fences.Fence{moved}, nil); err != nil {
		return f, nil, err
	}
	f.UpdateSeconds = time.Since(t0).Seconds()
	return f, c, nil
}

// scaleRecovery starts the debouncer cold, waits for its timer index to hold
// every device, watches it idle, makes its timers due (scaleTimers), and
// restarts it warm.
func (e *env) scaleRecovery(ctx context.Context, n int, idle time.Duration, baseMs int64) (RecoveryFigures, IdleFigures, TimerFigures, error) {
	var r RecoveryFigures
	var id IdleFigures
	var tf TimerFigures
	r.Devices = n
	dir := e.stateDir("scale-debouncer")
	defer os.RemoveAll(dir)
	runtime.GC()
	debug.FreeOSMemory()
	rss0, heap0 := rss(), heap()
	e.progress("debouncer: cold start over %d envelopes", n)
	t0 := time.Now()
	run, err := e.startIn(ctx, false, dir)
	if err != nil {
		return r, id, tf, err
	}
	r.ColdSeconds = time.Since(t0).Seconds()
	if r.ColdSeconds > 0 {
		r.RecordsPerSec = float64(n) / r.ColdSeconds
	}
	deadline := time.Now().Add(stageLimit)
	for run.deb.TimerStats().Indexed < n && time.Now().Before(deadline) {
		select {
		case err := <-run.errc:
			run.stop()
			return r, id, tf, fmt.Errorf("debouncer stopped: %v", err)
		case <-time.After(poll):
		}
	}
	st0, c0, w0 := run.deb.TimerStats(), cpu(), time.Now()
	select {
	case err := <-run.errc:
		run.stop()
		return r, id, tf, fmt.Errorf("debouncer stopped: %v", err)
	case <-time.After(idle): // the window watched, not a wait for a condition
	}
	st1, c1 := run.deb.TimerStats(), cpu()
	id.Seconds = time.Since(w0).Seconds()
	id.TimersIndexed, id.Looks, id.KeysRead = st1.Indexed, st1.Looks-st0.Looks, st1.KeysRead-st0.KeysRead
	id.CPUFraction = (c1 - c0).Seconds() / id.Seconds
	if id.Looks > 0 {
		id.LookCPUMicros = float64((c1 - c0).Microseconds()) / float64(id.Looks)
	}
	runtime.GC()
	r.RSSMB = float64(rss()-rss0) / (1 << 20)
	r.HeapMB = float64(heap()-heap0) / (1 << 20)
	r.DiskMB = float64(diskUsage(dir)) / (1 << 20) // before the burst rewrites every envelope
	tf, err = e.scaleTimers(ctx, run, n, baseMs)
	run.stop()
	if err != nil {
		return r, id, tf, fmt.Errorf("timers: %w", err)
	}
	e.progress("debouncer: warm start")
	t0 = time.Now()
	run, err = e.startIn(ctx, false, dir)
	if err != nil {
		return r, id, tf, err
	}
	r.WarmSeconds = time.Since(t0).Seconds()
	run.stop()
	return r, id, tf, nil
}

// scaleView starts a view of the debouncer's table on an empty state
// directory (cold), then again on the one it left (warm); warm counts from
// view.New, which asks the broker for the cluster and the partitions.
func (e *env) scaleView(ctx context.Context, n int) (ViewFigures, error) {
	var f ViewFigures
	dir := e.stateDir("scale-view")
	defer os.RemoveAll(dir)
	runtime.GC()
	debug.FreeOSMemory()
	rss0 := rss()
	// Every partition through the kit's view, as fenceview reads the table
	// by default (Goka's view of every partition is the other choice).
	every := make([]int32, e.cfg.Partitions)
	for p := range every {
		every[p] = int32(p)
	}
	for i, what := range []string{"cold", "warm"} {
		e.progress("view: %s start over %d devices", what, n)
		t0 := time.Now()
		v, err := view.New[geofencepb.DeviceState](e.cl, geofence.TopicDebouncer, view.StateDir(dir), view.Storage(e.cfg.Storage),
			view.Partitions(every...))
		if err != nil {
			return f, err
		}
		vctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- v.Run(vctx) }()
		wctx, wcancel := context.WithTimeout(ctx, stageLimit)
		err = v.WaitRecovered(wctx)
		wcancel()
		secs := time.Since(t0).Seconds()
		if i == 0 {
			f.ColdSeconds = secs
			runtime.GC()
			f.RSSMB = float64(rss()-rss0) / (1 << 20)
		} else {
			f.WarmSeconds = secs
		}
		cancel()
		if rerr := <-done; rerr != nil && !errors.Is(rerr, context.Canceled) && err == nil {
			err = rerr
		}
		if err != nil {
			return f, fmt.Errorf("view %s start: %w", what, err)
		}
	}
	return f, nil
}
