package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
)

// StorageConfig sizes a storage comparison.
type StorageConfig struct {
	Cluster cluster.Config // empty Brokers: embedded (see Config.Cluster)
	// Kinds to compare (default: all).
	Kinds []statestore.Kind
	// Pings through the counter and the debouncer per kind (default 300,000).
	Pings int
	// Devices sending them (default 10,000).
	Devices int
	// States are the debouncer table sizes restarted (default 100,000 and 1,000,000).
	States     []int
	Partitions int32
	Progress   io.Writer
	StateDir   string
}

// Restart is one table size's restart figures for one store.
type Restart struct {
	Devices int `json:"devices"`
	// ColdSeconds: from start with an empty state directory until the
	// debouncer is ready (the table rebuilt from the changelog).
	ColdSeconds float64 `json:"cold_s"`
	// WarmSeconds: restart on the state directory the cold start left.
	WarmSeconds float64 `json:"warm_s"`
	DiskMB      float64 `json:"disk_mb"`
	// RSSMB is how much the process's resident memory grew while the
	// recovered debouncer ran (baseline taken after a GC before the start).
	RSSMB  float64 `json:"rss_mb"`
	HeapMB float64 `json:"heap_mb"`
}

// StorageFigures are one store's figures.
type StorageFigures struct {
	Kind        statestore.Kind `json:"storage"`
	GokaCounter Stage           `json:"goka_counter"`
	Debouncer   Stage           `json:"debouncer"`
	Restarts    []Restart       `json:"restarts"`
}

// StorageResult is a whole comparison, every store measured in one run.
type StorageResult struct {
	CPUs         int              `json:"cpus"`
	Pings        int              `json:"pings"`
	Devices      int              `json:"devices"`
	Partitions   int32            `json:"partitions"`
	Stores       []StorageFigures `json:"stores"`
	TotalSeconds float64          `json:"total_s"`
}

// CompareStorage measures each store: the bare counter's and the debouncer's
// throughput on the same pings, then cold and warm restart of the debouncer
// over a table of each size, its disk and memory.
func CompareStorage(ctx context.Context, sc StorageConfig) (*StorageResult, error) {
	start := time.Now()
	if sc.Kinds == nil {
		sc.Kinds = statestore.Kinds()
	}
	if sc.States == nil {
		sc.States = []int{100_000, 1_000_000}
	}
	cfg := Config{Cluster: sc.Cluster, Pings: sc.Pings, Devices: sc.Devices, Rates: []int{}, Partitions: sc.Partitions, Progress: sc.Progress, StateDir: sc.StateDir, Flush: -1}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, log: quietLog}
	cleanup, err := e.connect()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	e.progress("simulating %d pings from %d devices", cfg.Pings, cfg.Devices)
	if err := e.simulate(cfg.Pings); err != nil {
		return nil, err
	}
	res := &StorageResult{CPUs: runtime.NumCPU(), Pings: cfg.Pings, Devices: cfg.Devices, Partitions: cfg.Partitions}
	for _, kind := range sc.Kinds {
		e.cfg.Storage = kind
		f := StorageFigures{Kind: kind}
		if err := e.fresh(ctx); err != nil {
			return nil, err
		}
		if f.GokaCounter, err = e.counter(ctx); err != nil {
			return nil, fmt.Errorf("%s counter: %w", kind, err)
		}
		if f.Debouncer, err = e.debouncer(ctx); err != nil {
			return nil, fmt.Errorf("%s debouncer: %w", kind, err)
		}
		e.progress("%s: counter %.0f pings/s, debouncer %.0f pings/s", kind, f.GokaCounter.PingsPerSec, f.Debouncer.PingsPerSec)
		res.Stores = append(res.Stores, f)
	}
	// Restarts: one table per size, every store restarted over it.
	for _, n := range sc.States {
		if err := e.reset(ctx); err != nil {
			return nil, err
		}
		if _, err := e.produceStates(ctx, n, seedBaseMs); err != nil {
			return nil, err
		}
		for i, kind := range sc.Kinds {
			e.cfg.Storage = kind
			r, err := e.restart(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("%s restart with %d devices: %w", kind, n, err)
			}
			res.Stores[i].Restarts = append(res.Stores[i].Restarts, r)
			e.progress("%s, %d devices: cold %.2f s, warm %.2f s, disk %.0f MB, rss +%.0f MB, heap +%.0f MB", kind, n, r.ColdSeconds, r.WarmSeconds, r.DiskMB, r.RSSMB, r.HeapMB)
		}
	}
	res.TotalSeconds = time.Since(start).Seconds()
	return res, nil
}

// produceStates writes n device states to the debouncer's table topic as the
// debouncer writes them: envelopes with a busy device's state, a cursor with
// its outputs and a pending timer (deviceEnvelope). It returns their mean
// size by part. baseMs sets the devices' last fix (deviceEnvelope).
func (e *env) produceStates(ctx context.Context, n int, baseMs int64) (EnvelopeBytes, error) {
	e.progress("producing %d device envelopes", n)
	var sum EnvelopeBytes
	if err := e.newProducer(); err != nil {
		return sum, err
	}
	const batch = 50_000
	for i := 0; i < n; i += batch {
		recs := make([]*kgo.Record, 0, batch)
		for j := i; j < min(n, i+batch); j++ {
			dev, v, parts, err := deviceEnvelope(j, e.cfg.Partitions, baseMs)
			if err != nil {
				return sum, err
			}
			sum.Total += parts.Total
			sum.State += parts.State
			sum.Cursors += parts.Cursors
			sum.Outputs += parts.Outputs
			sum.Timers += parts.Timers
			recs = append(recs, &kgo.Record{Topic: geofence.TopicDebouncer, Key: []byte(dev), Value: v})
		}
		if err := e.kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return sum, err
		}
	}
	if n > 0 {
		sum = EnvelopeBytes{Total: sum.Total / n, State: sum.State / n, Cursors: sum.Cursors / n, Outputs: sum.Outputs / n, Timers: sum.Timers / n}
	}
	return sum, nil
}

// restart starts the debouncer on an empty state directory (cold), measures
// its disk and memory once recovered, stops it and starts it again on the
// same directory (warm).
func (e *env) restart(ctx context.Context, n int) (Restart, error) {
	r := Restart{Devices: n}
	dir := e.stateDir(fmt.Sprintf("restart-%s-%d", e.cfg.Storage, n))
	defer os.RemoveAll(dir)
	runtime.GC()
	debug.FreeOSMemory()
	rss0, heap0 := rss(), heap()
	t0 := time.Now()
	run, err := e.startIn(ctx, false, dir)
	if err != nil {
		return r, err
	}
	r.ColdSeconds = time.Since(t0).Seconds()
	runtime.GC()
	r.RSSMB = float64(rss()-rss0) / (1 << 20)
	r.HeapMB = float64(heap()-heap0) / (1 << 20)
	run.stop()
	r.DiskMB = float64(diskUsage(dir)) / (1 << 20)
	t0 = time.Now()
	run, err = e.startIn(ctx, false, dir)
	if err != nil {
		return r, err
	}
	r.WarmSeconds = time.Since(t0).Seconds()
	run.stop()
	return r, nil
}

func heap() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// rss is the resident set size from /proc (0 where there is none).
func rss() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func diskUsage(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// connect starts the embedded broker unless one is configured, and the
// admin client; cleanup undoes both.
func (e *env) connect() (cleanup func(), err error) {
	var closers []func()
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	e.cl = e.cfg.Cluster
	if len(e.cl.Brokers) == 0 {
		b, err := embedded.Start()
		if err != nil {
			return cleanup, err
		}
		closers = append(closers, b.Close)
		e.cl = cluster.Config{Brokers: b.Addrs()}
	}
	e.dirs = e.cfg.StateDir
	if e.dirs == "" {
		d, err := os.MkdirTemp("", "fencestream-bench-")
		if err != nil {
			cleanup()
			return func() {}, err
		}
		closers = append(closers, func() { os.RemoveAll(d) })
		e.dirs = d
	}
	e.topo = geofence.Topology(geofence.Partitions(e.cfg.Partitions))
	kopts, err := e.cl.Kgo()
	if err != nil {
		cleanup()
		return func() {}, err
	}
	admc, err := kgo.NewClient(kopts...)
	if err != nil {
		cleanup()
		return func() {}, err
	}
	closers = append(closers, admc.Close, func() {
		if e.kc != nil {
			e.kc.Close()
		}
	})
	e.adm = newAdmin(admc)
	e.cat = fences.New()
	if err := e.cat.Apply(1, fences.Demo(), nil); err != nil {
		cleanup()
		return func() {}, err
	}
	return cleanup, nil
}
