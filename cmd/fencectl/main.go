// Command fencectl is fencestream's operator tool: it describes and checks the
// declared topology, prints a declared topic's records as JSON, answers where
// a key lands, measures partition skew, loads, deletes and lists fences, runs
// the fleet simulator, scores trigger detectors against ground truth, and runs
// the embedded broker as a process of its own.
//
// Exit codes: 0 success, 1 failure (including a topology mismatch or an
// unreachable broker), 2 usage error, 3 skew above the alert threshold.
package main

import (
	"context"
	"io"
	"os"

	"github.com/fencestream/fencestream/processors/group/host"
)

func main() {
	ctx, stop := host.SignalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitSkew    = 3
)

// run executes one fencectl command line and returns its exit code. Results go
// to stdout, errors and progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "topology":
		return runTopology(ctx, rest, stdout, stderr)
	case "topic":
		return runTopic(ctx, rest, stdout, stderr)
	case "partition":
		return runPartition(rest, stdout, stderr)
	case "skew":
		return runSkew(ctx, rest, stdout, stderr)
	case "fences":
		return runFences(ctx, rest, stdout, stderr)
	case "subscriptions":
		return runSubscriptions(ctx, rest, stdout, stderr)
	case "sim":
		return runSim(ctx, rest, stdout, stderr)
	case "broker":
		return runBroker(ctx, rest, stdout, stderr)
	case "quality":
		return runQuality(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "reset":
		return runReset(ctx, rest, stdout, stderr)
	}
	return usageError(stderr, "fencectl", "unknown command %q", cmd)
}

func usage(w io.Writer) {
	io.WriteString(w, `Usage: fencectl COMMAND [flags]

Commands:
  topology describe [--format text|mermaid] [--partitions N]
                      print the declared topology (topics, processors, boundaries)
                      and each DSL app's operators
  topology check --brokers B [--create]
                      compare the broker's topics with the declared topology
  topic read TOPIC --brokers B [--from-beginning|--from-time T] [--follow] [--partition P] [--limit N]
                      print a declared topic's records as JSON lines (key, partition,
                      offset, timestamp, headers, value decoded by its declared type)
  partition KEY... [-n N]
                      the partition of KEY under the pinned murmur2 partitioner
  skew TOPIC --brokers B
                      per-partition record counts, max/mean; alert above 3x
  fences load FILE|--demo --brokers B [--dry-run]
                      validate a GeoJSON FeatureCollection and publish it whole
  fences delete ID... --brokers B
                      delete fences (tombstones on the fences topic)
  fences list --brokers B
                      list the fences the fences topic holds
  subscriptions add ID --url URL --secret S [--fence F]... [--type T]... --brokers B
                      add or replace a webhook subscription (processors/delivery)
  subscriptions list|disable ID...|rm ID... --brokers B
                      list, disable or remove webhook subscriptions
  sim --brokers B [--devices N --parked N --rate HZ --noise M --seed S ...]
                      run the seeded fleet simulator, producing pings
  sim misorder [--seed S ...]
                      per keying strategy: misordered pairs per million and skew
  broker --data DIR [--listen 127.0.0.1:PORT]
                      run the embedded broker until SIGINT/SIGTERM; prints its address
  quality [--seed S --devices N --noise 2,5,10 --format table|json ...]
                      score trigger detectors against ground truth per distance band
  bench [--brokers B] [--pings N --devices N --rates R,... --storage S]
                      throughput (raw consumer, Goka counter, debouncer, pipeline) and
                      latency at fixed rates, as one JSON object
  reset --group G (--to-earliest|--to-time T) [--state-dir DIR] --brokers B
                      make a stopped group reprocess its inputs: offsets, internal
                      topics and local state reset (refused while it has members)
  bench storage [--brokers B] [--states N,N --kinds K,K]
                      the group-table stores side by side: throughput, restart, disk, memory
  bench redis [--brokers B] [--pings N --storage S --rounds N]
                      the debouncer with its table local and in a redis-server it starts

Run "fencectl COMMAND --help" for a command's flags. Broker flags also read
FENCESTREAM_BROKERS, FENCESTREAM_TLS, FENCESTREAM_SASL_* from the environment.

Exit codes: 0 ok, 1 failure or mismatch, 2 usage error, 3 skew alert.
`)
}
