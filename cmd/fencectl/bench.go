package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/fencestream/fencestream/processors/bench"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "storage" {
		return runBenchStorage(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale" {
		return runBenchScale(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "redis" {
		return runBenchRedis(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "occupancy" {
		return runBenchOccupancy(ctx, args[1:], stdout, stderr)
	}
	c := newCommand("bench", "bench [--brokers B] [--pings N --devices N --rates R,R,... --window D --storage S --flush D]",
		`Measures, in one run, the same pre-produced fleet pings through (a) a raw franz-go
consumer, (b) a bare Goka counter with the same storage (b0: on Goka's LevelDB), (f) the
same count per key written in the stream DSL, (c) the debouncer, (d) the full pipeline
(debouncer + occupancy) and (e) occupancy alone, then offers pings at fixed rates and measures
ping->trigger and ping->occupancy latency and the backlog at the end of each window.
Every stage runs in this process (with the embedded broker, if any); "fencectl bench
occupancy" measures the occupancy binary as a process of its own against a broker in
another.
Progress goes to stderr; one JSON object with every figure to stdout. Without --brokers it
starts an embedded broker; with --brokers the geofencing topics and groups ON THAT CLUSTER
ARE DELETED and recreated.`)
	var cl cluster.Config
	cl.ClientID = "fencectl-bench"
	cl.RegisterFlags(c.fs)
	pings := c.fs.Int("pings", 300_000, "pings through each throughput stage")
	devices := c.fs.Int("devices", 10_000, "simulated devices")
	rates := c.fs.String("rates", "10000,20000,40000", "offered rates in pings/s, comma-separated (empty: none)")
	window := c.fs.Duration("window", 5*time.Second, "how long each rate is offered")
	interval := c.fs.Duration("interval", 5*time.Second, "interval between one device's pings (event time)")
	storage := statestore.Default
	c.fs.TextVar(&storage, "storage", statestore.Default, statestore.FlagUsage)
	flush := c.fs.Duration("flush", -1, "processors' producer flush frequency (negative: the processors' default)")
	recordCache := c.fs.Int("record-cache", group.DefaultRecordCache, "processors' record cache in bytes (group.RecordCache; 0: off)")
	triggers := c.fs.Int("triggers", 100_000, "triggers through the occupancy-alone stage (0: skip it)")
	triggerDevices := c.fs.Int("trigger-devices", 20_000, "devices the occupancy stage's triggers are for")
	profileDir := c.fs.String("cpuprofile", "", "directory to write a CPU profile (STAGE.pprof) and allocation profiles (STAGE.allocs, base STAGE.allocs-start) of each throughput stage to (empty: none)")
	partitions := partitionsFlag(c.fs)
	if code, ok := c.parseFlagsOnly(args, partitions, stdout, stderr); !ok {
		return code
	}
	rs, err := positiveInts(*rates)
	if err != nil {
		return c.usageErr(stderr, "--rates: %v", err)
	}
	if *pings <= 0 || *devices <= 0 || *window <= 0 || *interval <= 0 {
		return c.usageErr(stderr, "--pings, --devices, --window and --interval must be positive")
	}
	res, err := bench.Run(ctx, bench.Config{
		Cluster: cl, Pings: *pings, Devices: *devices, Rates: rs, Window: *window, Interval: *interval,
		Storage: storage, Flush: *flush, RecordCache: cacheOrOff(*recordCache), Partitions: int32(*partitions), Progress: stderr,
		Triggers: skipIfZero(*triggers), TriggerDevices: *triggerDevices,
		Profile: stageProfiles(*profileDir, stderr),
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	return writeJSON(c, res, stdout, stderr)
}

// stageProfiles writes a CPU profile of each stage to dir/STAGE.pprof (nil
// when dir is empty). A profile that cannot be written is reported and skipped:
// it must not fail the measurement.
func stageProfiles(dir string, stderr io.Writer) func(string) func() {
	if dir == "" {
		return nil
	}
	return func(stage string) func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			return func() {}
		}
		f, err := os.Create(filepath.Join(dir, stage+".pprof"))
		if err != nil {
			fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			return func() {}
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			_ = f.Close()
			return func() {}
		}
		// Allocations are cumulative: STAGE.allocs-start is the base to
		// subtract (go tool pprof -base).
		writeAllocs := func(name string) {
			f, err := os.Create(filepath.Join(dir, name))
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(stderr, "bench: allocation profile: %v\n", err)
			}
		}
		writeAllocs(stage + ".allocs-start")
		return func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(stderr, "bench: cpu profile: %v\n", err)
			}
			writeAllocs(stage + ".allocs")
		}
	}
}

// skipIfZero maps a flag's 0 (skip the stage) to the Config's -1 (its 0
// means the default).
// cacheOrOff is --record-cache as bench.Config takes it: 0 (off) is negative
// there, where 0 is the group default.
func cacheOrOff(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

func skipIfZero(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// parseFlagsOnly parses a command that takes no positional arguments and
// checks its --partitions; ok=false returns the exit code.
func (c *command) parseFlagsOnly(args []string, partitions *int, stdout, stderr io.Writer) (int, bool) {
	pos, code, ok := c.parse(args, stdout, stderr)
	switch {
	case !ok:
		return code, false
	case len(pos) > 0:
		return c.usageErr(stderr, "unexpected arguments %q", pos), false
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err), false
	}
	return exitOK, true
}

func writeJSON(c *command, v any, stdout, stderr io.Writer) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail(stderr, fmt.Errorf("writing the result: %w", err))
	}
	return exitOK
}

// positiveInts parses a comma-separated list of positive integers.
func positiveInts(list string) ([]int, error) {
	out := []int{}
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func runBenchStorage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench storage", "bench storage [--brokers B] [--pings N --devices N --states N,N --kinds K,K]",
		`Compares the local stores of the group tables in one run: for each, a bare Goka counter's
and the debouncer's throughput on the same pings, then cold (empty state directory) and
warm restart of the debouncer over tables of --states devices, with disk and memory. One
JSON object to stdout. With --brokers the geofencing topics and groups ON THAT CLUSTER ARE
DELETED and recreated.`)
	var cl cluster.Config
	cl.ClientID = "fencectl-bench"
	cl.RegisterFlags(c.fs)
	pings := c.fs.Int("pings", 300_000, "pings through the counter and the debouncer per store")
	devices := c.fs.Int("devices", 10_000, "simulated devices")
	states := c.fs.String("states", "100000,1000000", "debouncer table sizes to restart, comma-separated")
	kinds := c.fs.String("kinds", "", "stores to compare, comma-separated (default: all)")
	partitions := partitionsFlag(c.fs)
	if code, ok := c.parseFlagsOnly(args, partitions, stdout, stderr); !ok {
		return code
	}
	ss, err := positiveInts(*states)
	if err != nil {
		return c.usageErr(stderr, "--states: %v", err)
	}
	var ks []statestore.Kind
	for _, f := range strings.Split(*kinds, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		k, err := statestore.ParseKind(f)
		if err != nil {
			return c.usageErr(stderr, "--kinds: %v", err)
		}
		ks = append(ks, k)
	}
	if *pings <= 0 || *devices <= 0 {
		return c.usageErr(stderr, "--pings and --devices must be positive")
	}
	res, err := bench.CompareStorage(ctx, bench.StorageConfig{
		Cluster: cl, Kinds: ks, Pings: *pings, Devices: *devices, States: ss,
		Partitions: int32(*partitions), Progress: stderr,
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	return writeJSON(c, res, stdout, stderr)
}

func runBenchScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench scale", "bench scale [--brokers B] [--devices N --fences N --idle D --storage S]",
		`Builds a debouncer table of --devices real envelopes (state, a cursor with its outputs and
a pending silence timer each) and a catalogue of --fences synthetic fences, and measures in
one run: the catalogue's load and one update, the envelopes' bytes by part, the debouncer's
cold (empty state directory) and warm recovery with its restore throughput, disk and memory,
its CPU and timer looks while idle for --idle, how late its timers fire once due, how long
input waits while every device's timer falls due at once (a trickle of pings through the
burst), and the kit's view's cold and warm start. Progress to stderr, one JSON object to
stdout. With --brokers the geofencing topics and groups ON THAT
CLUSTER ARE DELETED and recreated.`)
	var cl cluster.Config
	cl.ClientID = "fencectl-bench"
	cl.RegisterFlags(c.fs)
	devices := c.fs.Int("devices", 1_000_000, "devices in the debouncer's table")
	nf := c.fs.Int("fences", 100_000, "synthetic fences in the catalogue")
	idle := c.fs.Duration("idle", 10*time.Second, "how long the recovered debouncer is watched idle")
	storage := statestore.Default
	c.fs.TextVar(&storage, "storage", statestore.Default, statestore.FlagUsage)
	partitions := partitionsFlag(c.fs)
	if code, ok := c.parseFlagsOnly(args, partitions, stdout, stderr); !ok {
		return code
	}
	if *devices <= 0 || *nf <= 0 || *idle <= 0 {
		return c.usageErr(stderr, "--devices, --fences and --idle must be positive")
	}
	res, err := bench.Scale(ctx, bench.ScaleConfig{
		Cluster: cl, Devices: *devices, Fences: *nf, Idle: *idle, Storage: storage,
		Partitions: int32(*partitions), Progress: stderr,
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	return writeJSON(c, res, stdout, stderr)
}

func runBenchRedis(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench redis", "bench redis [--brokers B] [--pings N --devices N --storage S --rounds N]",
		`Measures, in one run, the same debouncer over the same pings with its table in the
local store (--storage) and in Redis (statestore.Redis: one round trip per read and per
write), --rounds times each in alternating order, and one HGET's round trip. Starts Debian's redis-server (package redis-server) on
127.0.0.1 at a free port without persistence and stops it at the end. Progress to stderr,
one JSON object to stdout with both throughputs and local_over_redis. With --brokers the
geofencing topics and groups ON THAT CLUSTER ARE DELETED and recreated.`)
	var cl cluster.Config
	cl.ClientID = "fencectl-bench"
	cl.RegisterFlags(c.fs)
	pings := c.fs.Int("pings", 300_000, "pings through each debouncer")
	devices := c.fs.Int("devices", 10_000, "simulated devices")
	storage := statestore.Default
	c.fs.TextVar(&storage, "storage", statestore.Default, "local store compared with Redis: pebble, leveldb, memory or goka-leveldb")
	rounds := c.fs.Int("rounds", 2, "rounds of both stages, the order alternating")
	partitions := partitionsFlag(c.fs)
	if code, ok := c.parseFlagsOnly(args, partitions, stdout, stderr); !ok {
		return code
	}
	if *pings <= 0 || *devices <= 0 || *rounds <= 0 {
		return c.usageErr(stderr, "--pings, --devices and --rounds must be positive")
	}
	if storage == statestore.Redis {
		return c.usageErr(stderr, "--storage: the local store to compare with Redis, not redis")
	}
	res, err := bench.CompareRedis(ctx, bench.RedisConfig{
		Cluster: cl, Pings: *pings, Devices: *devices, Local: storage, Rounds: *rounds,
		Partitions: int32(*partitions), Progress: stderr,
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	return writeJSON(c, res, stdout, stderr)
}

func runBenchOccupancy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench occupancy", "bench occupancy --brokers B --exec PATH [--triggers N --trigger-devices N --record-cache BYTES] [-- BINARY FLAGS]",
		`Measures the occupancy binary as a process of its own against the broker B, itself a
separate process ("fencectl broker --data DIR" prints its address) or a real cluster.
The geofencing topics and groups ON B ARE DELETED and recreated; then it loads the demo
fences and produces --triggers well-formed ENTER/EXIT triggers for --trigger-devices
devices over 7 demo fences straight to fence-triggers (stage (e)'s). It starts PATH
(go build -o /tmp/occupancy ./cmd/occupancy) with --brokers B --state-dir TEMP
--partitions N --metrics-addr 127.0.0.1:FREE, --record-cache when given, the TLS and
SASL flags given here, then the arguments after "--" (not --brokers, --state-dir or
--metrics-addr). It times the binary from its /readyz's first 200 until its /metrics
show every trigger applied once and every count change added up (anything else fails
the run), then stops it with SIGTERM, checks both groups committed every offset and
removes TEMP. A binary not ready within --ready-timeout, or applying nothing for
--stall-timeout, fails the run. Progress to stderr; one JSON object to stdout with
triggers_per_s and cpu_us_per_trigger, the binary's own CPU (user+system) in the
timed window per trigger (with --broker-pid, broker_cpu_us_per_trigger too).`)
	var cl cluster.Config
	cl.ClientID = "fencectl-bench"
	cl.RegisterFlags(c.fs)
	exe := c.fs.String("exec", "", "the occupancy binary to run (required; go build -o /tmp/occupancy ./cmd/occupancy)")
	triggers := c.fs.Int("triggers", 100_000, "triggers produced to fence-triggers before the binary starts")
	triggerDevices := c.fs.Int("trigger-devices", 20_000, "devices the triggers are for")
	recordCache := c.fs.Int("record-cache", 0, "given to the binary as --record-cache when positive (the binary must have the flag)")
	readyTimeout := c.fs.Duration("ready-timeout", 2*time.Minute, "how long the binary may take to answer 200 on /readyz")
	stallTimeout := c.fs.Duration("stall-timeout", time.Minute, "how long the binary may apply nothing before the run fails")
	brokerPID := c.fs.Int("broker-pid", 0, "the broker's process id on this machine, to report its CPU per trigger too (0: not reported)")
	partitions := partitionsFlag(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	switch {
	case len(cl.Brokers) == 0:
		return c.usageErr(stderr, "--brokers is required: the binary runs against a broker in another process (fencectl broker --data DIR prints one)")
	case *exe == "":
		return c.usageErr(stderr, "--exec is required (go build -o /tmp/occupancy ./cmd/occupancy)")
	case *triggers <= 0 || *triggerDevices <= 0:
		return c.usageErr(stderr, "--triggers and --trigger-devices must be positive")
	case *recordCache < 0:
		return c.usageErr(stderr, "--record-cache must not be negative")
	case *readyTimeout <= 0 || *stallTimeout <= 0:
		return c.usageErr(stderr, "--ready-timeout and --stall-timeout must be positive")
	case *brokerPID < 0:
		return c.usageErr(stderr, "--broker-pid must not be negative")
	}
	res, err := bench.OccupancyProcess(ctx, bench.ProcessConfig{
		Cluster: cl, Exec: *exe, Args: pos, Triggers: *triggers, TriggerDevices: *triggerDevices,
		RecordCache: *recordCache, Partitions: int32(*partitions),
		ReadyTimeout: *readyTimeout, StallTimeout: *stallTimeout, BrokerPID: *brokerPID, Progress: stderr,
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	return writeJSON(c, res, stdout, stderr)
}
