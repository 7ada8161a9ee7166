// Package bench is what `fencectl bench` runs: the same pre-produced
// realistic pings (processors/fleet over the demo fences) through a raw
// franz-go consumer (the broker's ceiling), a bare Goka counter with the same
// storage (the framework's floor), the same count per key written in the
// stream DSL (processors/group/streams), the debouncer, and the full pipeline
// (debouncer + occupancy); then pings offered at fixed rates, with
// ping→trigger and ping→occupancy latency percentiles and the backlog left at
// the end of each window. Everything is measured in one process, one run, so
// the figures are comparable with each other.
//
// Throughput is timed from the first record a stage processes to the last
// (group joins and table recovery are not in it). Latency is wall time from
// handing a ping to the producer to seeing its trigger (or the occupancy
// record it changed) on the output topic.
//
// CompareRedis (fencectl bench redis) runs the same debouncer with its table
// in the local store and in a redis-server it starts and stops, in one run:
// what local state is worth against a shared store.
//
// OccupancyProcess (fencectl bench occupancy) runs the occupancy binary as a
// process of its own against a broker in another, over stage (e)'s
// triggers: occupancy as production runs it, its CPU apart from the
// broker's and the bench's.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Config sizes a run.
type Config struct {
	// Cluster is the broker to use; empty Brokers starts an embedded one. The
	// geofencing topics and groups on it are deleted and recreated.
	Cluster cluster.Config
	// Pings go through each throughput stage (default 300,000).
	Pings int
	// Devices send them (default 10,000).
	Devices int
	// Rates are the offered rates in pings/s (default 10k, 20k, 40k).
	Rates []int
	// Window is how long each rate is offered (default 5 s).
	Window time.Duration
	// Interval between one device's pings (default 5 s: a fleet tracker's
	// usual rate; it also makes the short simulated span cover enough
	// driving for fence transitions to happen).
	Interval time.Duration
	// Storage of every Goka table (default statestore.Default).
	Storage statestore.Kind
	// Flush is the processors' producer flush (negative: the group default).
	Flush time.Duration
	// RecordCache is the processors' record cache in bytes (group.RecordCache;
	// 0: the group default, group.DefaultRecordCache; negative: off).
	RecordCache int
	// Partitions of the keyed topics (default topology.DefaultPartitions).
	Partitions int32
	// Progress receives one line per step (default: discarded).
	Progress io.Writer
	// StateDir holds the Goka tables (default: a temporary directory, removed).
	StateDir string
	// Triggers go through the occupancy stage, produced straight to
	// fence-triggers (default 100,000), for TriggerDevices devices (default
	// 20,000) over the catalogue's first 7 fences. Negative: no such stage.
	Triggers       int
	TriggerDevices int
	// Profile, when set, is called as each throughput stage starts ("b", "b0",
	// "f", "c", "d", "e"); the function it returns is called when the stage ends
	// (fencectl bench --cpuprofile writes one CPU profile per stage with it).
	Profile func(stage string) (stop func())
}

func (c *Config) defaults() error {
	if c.Pings == 0 {
		c.Pings = 300_000
	}
	if c.Devices == 0 {
		c.Devices = 10_000
	}
	if c.Rates == nil {
		c.Rates = []int{10_000, 20_000, 40_000}
	}
	if c.Window == 0 {
		c.Window = 5 * time.Second
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Storage == "" {
		c.Storage = statestore.Default
	}
	if c.Partitions == 0 {
		c.Partitions = topology.DefaultPartitions
	}
	if c.Triggers == 0 {
		c.Triggers = 100_000
	}
	if c.TriggerDevices <= 0 {
		c.TriggerDevices = 20_000
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case c.Pings < 1 || c.Devices < 1:
		return fmt.Errorf("pings and devices must be positive, got %d and %d", c.Pings, c.Devices)
	case c.Window <= 0:
		return fmt.Errorf("window must be positive, got %v", c.Window)
	}
	for _, r := range c.Rates {
		if r <= 0 {
			return fmt.Errorf("rates must be positive, got %d", r)
		}
	}
	return nil
}

// Stage is one throughput measurement.
type Stage struct {
	Pings       int     `json:"pings"`
	Seconds     float64 `json:"seconds"`
	PingsPerSec float64 `json:"pings_per_s"`
	// CPUMicrosPerPing is the process's CPU time (user+system, all
	// goroutines, the embedded broker included) per ping.
	CPUMicrosPerPing float64 `json:"cpu_us_per_ping"`
}

// Percentiles of a latency, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Rate is one fixed-rate window.
type Rate struct {
	Offered         int         `json:"offered_per_s"`
	Achieved        float64     `json:"achieved_per_s"`
	PingToTrigger   Percentiles `json:"ping_to_trigger"`
	PingToOccupancy Percentiles `json:"ping_to_occupancy"`
	// Backlogs at the end of the window: pings the debouncer had not
	// processed, triggers (and loop records) occupancy had not.
	DebouncerLag int64 `json:"debouncer_lag_end"`
	OccupancyLag int64 `json:"occupancy_lag_end"`
}

// Result is every figure of a run.
type Result struct {
	Machine struct {
		CPUs      int    `json:"cpus"`
		GOOS      string `json:"goos"`
		GOARCH    string `json:"goarch"`
		GoVersion string `json:"go"`
	} `json:"machine"`
	Config struct {
		Pings       int     `json:"pings"`
		Devices     int     `json:"devices"`
		Partitions  int32   `json:"partitions"`
		Storage     string  `json:"storage"`
		FlushMs     float64 `json:"producer_flush_ms"`
		RecordCache int     `json:"record_cache_bytes"` // 0: off
		WindowS     float64 `json:"window_s"`
		IntervalS   float64 `json:"ping_interval_s"`
		Fences      int     `json:"fences"`
		Broker      string  `json:"broker"`
	} `json:"config"`
	RawConsumer Stage `json:"a_raw_consumer"`
	GokaCounter Stage `json:"b_goka_counter"`
	// GokaCounterGokaLevelDB is the same counter on Goka's own LevelDB
	// storage (the old default), the yardstick for the pipeline.
	GokaCounterGokaLevelDB Stage `json:"b0_goka_counter_goka_leveldb"`
	Debouncer              Stage `json:"c_debouncer"`
	Pipeline               Stage `json:"d_pipeline"`
	// Occupancy is the occupancy processor alone over Config.Triggers
	// triggers (its "pings" are triggers).
	Occupancy Stage `json:"e_occupancy"`
	// DSLCount is b's count per device written in the stream DSL, run as a
	// kit group with the processors' options (storage as b's), right after
	// b0 on the same pings.
	DSLCount Stage `json:"f_dsl_count"`
	Ratios   struct {
		DebouncerOverCounter float64 `json:"c_over_b"`
		PipelineOverCounter  float64 `json:"d_over_b"`
		// PipelineOverGokaLevelDB is d over the counter on Goka's LevelDB.
		PipelineOverGokaLevelDB float64 `json:"d_over_b0"`
		// OccupancyOverGokaLevelDB is e's triggers/s over b0's records/s.
		OccupancyOverGokaLevelDB float64 `json:"e_over_b0"`
		// DSLOverCounter is f over b (the same storage); DSLOverGokaLevelDB
		// is f over b0.
		DSLOverCounter     float64 `json:"f_over_b"`
		DSLOverGokaLevelDB float64 `json:"f_over_b0"`
	} `json:"ratios"`
	Rates           []Rate  `json:"rates"`
	TotalSeconds    float64 `json:"total_s"`
	TriggersPerPing float64 `json:"triggers_per_ping"`
}

var quietLog = slog.New(slog.DiscardHandler)

var newAdmin = kadm.NewClient

// env is what the stages share.
type env struct {
	cfg     Config
	cl      cluster.Config
	topo    *topology.Topology
	adm     *kadm.Client
	kc      *kgo.Client
	cat     *fences.Catalogue
	pings   []*geofencepb.Ping
	encoded [][]byte
	log     *slog.Logger
	dirs    string
	step    atomic.Int32 // stages start processors concurrently
	// timerEvery, if set, overrides the processors' timer interval.
	timerEvery time.Duration
	// redisAddr is the server of statestore.Redis tables (CompareRedis).
	redisAddr string
}

// profile starts the stage's profile, if any; the result stops it.
func (e *env) profile(stage string) func() {
	if e.cfg.Profile == nil {
		return func() {}
	}
	return e.cfg.Profile(stage)
}

func (e *env) progress(format string, args ...any) {
	fmt.Fprintf(e.cfg.Progress, "bench: "+format+"\n", args...)
}

// Run runs every stage and returns the figures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	start := time.Now()
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: quietLog}
	res := &Result{}
	res.Machine.CPUs, res.Machine.GOOS, res.Machine.GOARCH, res.Machine.GoVersion = runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()
	res.Config.Pings, res.Config.Devices, res.Config.Partitions, res.Config.Storage = cfg.Pings, cfg.Devices, cfg.Partitions, string(cfg.Storage)
	res.Config.WindowS = cfg.Window.Seconds()
	res.Config.IntervalS = cfg.Interval.Seconds()
	res.Config.FlushMs = -1
	res.Config.RecordCache = max(cfg.RecordCache, 0)
	if cfg.RecordCache == 0 {
		res.Config.RecordCache = group.DefaultRecordCache
	}
	if cfg.Flush >= 0 {
		res.Config.FlushMs = float64(cfg.Flush) / float64(time.Millisecond)
	}
	res.Config.Broker = "external"
	if len(cfg.Cluster.Brokers) == 0 {
		res.Config.Broker = "embedded"
	}
	cleanup, err := e.connect()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res.Config.Fences = e.cat.Snapshot().Len()

	total := cfg.Pings
	for _, r := range cfg.Rates {
		total += int(float64(r) * cfg.Window.Seconds())
	}
	e.progress("simulating %d pings from %d devices over %d fences", total, cfg.Devices, res.Config.Fences)
	if err := e.simulate(total); err != nil {
		return nil, err
	}

	if err := e.fresh(ctx); err != nil {
		return nil, err
	}
	if res.RawConsumer, err = e.rawConsumer(ctx); err != nil {
		return nil, fmt.Errorf("raw consumer: %w", err)
	}
	e.progress("a raw consumer: %.0f pings/s", res.RawConsumer.PingsPerSec)
	stop := e.profile("b")
	res.GokaCounter, err = e.counter(ctx)
	stop()
	if err != nil {
		return nil, fmt.Errorf("goka counter: %w", err)
	}
	e.progress("b goka counter (%s): %.0f pings/s", cfg.Storage, res.GokaCounter.PingsPerSec)
	e.cfg.Storage = statestore.GokaLevelDB
	if err := e.fresh(ctx); err != nil {
		return nil, err
	}
	stop = e.profile("b0")
	res.GokaCounterGokaLevelDB, err = e.counter(ctx)
	stop()
	if err != nil {
		return nil, fmt.Errorf("goka counter on goka-leveldb: %w", err)
	}
	e.cfg.Storage = cfg.Storage
	e.progress("b0 goka counter (goka-leveldb): %.0f pings/s", res.GokaCounterGokaLevelDB.PingsPerSec)
	stop = e.profile("f")
	res.DSLCount, err = e.dslCount(ctx)
	stop()
	if err != nil {
		return nil, fmt.Errorf("dsl count: %w", err)
	}
	e.progress("f dsl count (%s): %.0f pings/s, %.1f µs CPU per ping", cfg.Storage, res.DSLCount.PingsPerSec, res.DSLCount.CPUMicrosPerPing)
	stop = e.profile("c")
	res.Debouncer, err = e.debouncer(ctx)
	stop()
	if err != nil {
		return nil, fmt.Errorf("debouncer: %w", err)
	}
	e.progress("c debouncer: %.0f pings/s", res.Debouncer.PingsPerSec)
	stop = e.profile("d")
	err = e.pipeline(ctx, res)
	stop()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if cfg.Triggers > 0 {
		stop = e.profile("e")
		res.Occupancy, err = e.occupancyAlone(ctx)
		stop()
		if err != nil {
			return nil, fmt.Errorf("occupancy alone: %w", err)
		}
		e.progress("e occupancy alone: %.0f triggers/s, %.0f µs CPU per trigger", res.Occupancy.PingsPerSec, res.Occupancy.CPUMicrosPerPing)
	}
	if res.GokaCounter.PingsPerSec > 0 {
		res.Ratios.DebouncerOverCounter = res.Debouncer.PingsPerSec / res.GokaCounter.PingsPerSec
		res.Ratios.PipelineOverCounter = res.Pipeline.PingsPerSec / res.GokaCounter.PingsPerSec
		res.Ratios.DSLOverCounter = res.DSLCount.PingsPerSec / res.GokaCounter.PingsPerSec
	}
	if res.GokaCounterGokaLevelDB.PingsPerSec > 0 {
		res.Ratios.PipelineOverGokaLevelDB = res.Pipeline.PingsPerSec / res.GokaCounterGokaLevelDB.PingsPerSec
		res.Ratios.OccupancyOverGokaLevelDB = res.Occupancy.PingsPerSec / res.GokaCounterGokaLevelDB.PingsPerSec
		res.Ratios.DSLOverGokaLevelDB = res.DSLCount.PingsPerSec / res.GokaCounterGokaLevelDB.PingsPerSec
	}
	res.TotalSeconds = time.Since(start).Seconds()
	return res, nil
}

func (e *env) simulate(total int) error {
	ticks := (total + e.cfg.Devices - 1) / e.cfg.Devices
	sim, err := fleet.New(fleet.Config{
		Seed:     1,
		Moving:   e.cfg.Devices - e.cfg.Devices/10,
		Parked:   e.cfg.Devices / 10,
		Interval: e.cfg.Interval,
		Duration: time.Duration(ticks+1) * e.cfg.Interval,
		StampHLC: true,
	}, e.cat.Snapshot().All())
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	all := sim.Pings()
	if len(all) < total {
		return fmt.Errorf("fleet gave %d pings, need %d", len(all), total)
	}
	e.pings = all[:total]
	enc := codecs.For[geofencepb.Ping]()
	e.encoded = make([][]byte, total)
	for i, p := range e.pings {
		if e.encoded[i], err = enc.Marshal(p); err != nil {
			return err
		}
	}
	return nil
}

// reset deletes the geofencing topics and groups and creates the topics again,
// so each stage starts from empty tables and outputs.
func (e *env) reset(ctx context.Context) error {
	groups := []string{geofence.GroupDebouncer, geofence.GroupOccupancyMembers, geofence.GroupOccupancy, counterGroup, dslGroup}
	if _, err := e.adm.DeleteGroups(ctx, groups...); err != nil {
		var ae *kadm.AuthError
		if errors.As(err, &ae) {
			return err
		}
	}
	names := []string{counterTable, dslTable}
	for _, t := range e.topo.Topics {
		names = append(names, t.Name)
	}
	if _, err := e.adm.DeleteTopics(ctx, names...); err != nil {
		return fmt.Errorf("deleting topics: %w", err)
	}
	// Deletion is asynchronous on a real cluster: wait until the names are gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := e.adm.ListTopics(ctx, names...)
		left := 0
		for _, d := range td {
			if d.Err == nil {
				left++
			}
		}
		if err == nil && left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("topics still listed 30 s after deletion")
		}
		time.Sleep(100 * time.Millisecond) // polling the broker's deletion, bounded by the deadline
	}
	if err := e.topo.Ensure(ctx, e.adm); err != nil {
		return err
	}
	for _, t := range []string{counterTable, dslTable} {
		if _, err := e.adm.CreateTopic(ctx, e.cfg.Partitions, -1, map[string]*string{"cleanup.policy": ptr("compact")}, t); err != nil {
			return fmt.Errorf("creating %s: %w", t, err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// fresh resets the broker and produces the throughput pings again.
func (e *env) fresh(ctx context.Context) error {
	if err := e.reset(ctx); err != nil {
		return err
	}
	return e.produceAll(ctx)
}

// produceAll produces the throughput pings (the first cfg.Pings) as fast as
// the broker takes them.
func (e *env) produceAll(ctx context.Context) error {
	e.progress("producing %d pings", e.cfg.Pings)
	if err := e.newProducer(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, e.cfg.Pings)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: geofence.TopicPings, Key: []byte(e.pings[i].DeviceId), Value: e.encoded[i]}
	}
	return e.kc.ProduceSync(ctx, recs...).FirstErr()
}

// newProducer replaces e.kc: after a reset, a client that knew the deleted
// topics would produce with their stale ids.
func (e *env) newProducer() error {
	if e.kc != nil {
		e.kc.Close()
	}
	kopts, err := e.cl.Kgo()
	if err != nil {
		return err
	}
	e.kc, err = kgo.NewClient(append(kopts, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))...)
	return err
}

// cpu is the process's user+system CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timer measures a stage from its first processed record to its last.
type timer struct {
	first    time.Time
	firstN   int
	firstCPU time.Duration
	// idle is the last observation with nothing processed yet: a stage that
	// finishes between two polls is timed from there (at most a poll long).
	idle    time.Time
	idleCPU time.Duration
}

func (t *timer) observe(n int) {
	switch {
	case n == 0:
		t.idle, t.idleCPU = time.Now(), cpu()
	case t.first.IsZero():
		t.first, t.firstN, t.firstCPU = time.Now(), n, cpu()
	}
}

func (t *timer) stage(n int) Stage {
	from, fromN, fromCPU := t.first, t.firstN, t.firstCPU
	if n == fromN && !t.idle.IsZero() {
		from, fromN, fromCPU = t.idle, 0, t.idleCPU
	}
	el := time.Since(from)
	done := n - fromN
	s := Stage{Pings: n, Seconds: el.Seconds()}
	if el > 0 && done > 0 {
		s.PingsPerSec = float64(done) / el.Seconds()
		s.CPUMicrosPerPing = float64((cpu()-fromCPU)/time.Microsecond) / float64(done)
	}
	return s
}
