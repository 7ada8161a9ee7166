package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/fencestream/fencestream/processors/bench"
	"github.com/fencestream/fencestream/processors/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench", "bench [--brokers B] [--pings N --devices N --rates R,R,... --window D --storage S --flush D]",
		`Measures, in one run, the same pre-produced fleet pings through (a) a raw franz-go
consumer, (b) a bare Goka counter with the same storage, (c) the debouncer and (d) the
full pipeline (debouncer + occupancy), then offers pings at fixed rates and measures
ping->trigger and ping->occupancy latency and the backlog at the end of each window.
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
	storage := statestore.Default
	c.fs.TextVar(&storage, "storage", statestore.Default, statestore.FlagUsage)
	flush := c.fs.Duration("flush", -1, "processors' producer flush frequency (negative: the processors' default)")
	partitions := partitionsFlag(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	rs := []int{}
	for _, f := range strings.Split(*rates, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return c.usageErr(stderr, "--rates: %q is not a positive number of pings per second", f)
		}
		rs = append(rs, r)
	}
	if *pings <= 0 || *devices <= 0 || *window <= 0 {
		return c.usageErr(stderr, "--pings, --devices and --window must be positive")
	}
	res, err := bench.Run(ctx, bench.Config{
		Cluster: cl, Pings: *pings, Devices: *devices, Rates: rs, Window: *window,
		Storage: storage, Flush: *flush, Partitions: int32(*partitions), Progress: stderr,
	})
	if err != nil {
		return c.fail(stderr, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return c.fail(stderr, fmt.Errorf("writing the result: %w", err))
	}
	return exitOK
}
