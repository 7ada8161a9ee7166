package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/topology"
)

func runPartition(args []string, stdout, stderr io.Writer) int {
	c := newCommand("partition", "partition KEY... [-n N]",
		`Prints the partition each KEY lands on among N partitions under the pinned partitioner,
(murmur2(utf8 key) & 0x7fffffff) % N, the Java client's default, and the raw murmur2 hash.
Keys are checked with the producers' rules (non-empty, valid UTF-8, at most 255 bytes).`)
	n := c.fs.Int("n", int(topology.DefaultPartitions), "number of partitions")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageErr(stderr, "missing KEY")
	}
	if *n <= 0 || *n > math.MaxInt32 {
		return c.usageErr(stderr, "-n must be a positive partition count, got %d", *n)
	}
	for _, key := range pos {
		if err := topology.ValidateKey(key, 0); err != nil {
			return c.fail(stderr, err)
		}
	}
	var tb table
	tb.row("KEY", "PARTITION", "OF", "MURMUR2")
	for _, key := range pos {
		tb.row(printableCell(key), strconv.Itoa(int(topology.PartitionFor(key, int32(*n)))), strconv.Itoa(*n), fmt.Sprintf("0x%08x", topology.Murmur2([]byte(key))))
	}
	if err := tb.write(stdout); err != nil {
		return c.fail(stderr, err)
	}
	return exitOK
}

// skewAlert is the design's alert threshold: max/mean above it is an alert.
const skewAlert = topology.SkewAlert

func runSkew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("skew", "skew TOPIC --brokers B",
		`Counts the records of each partition of TOPIC from the broker's offsets (end - start)
and prints skew = max over partitions / mean over partitions. Above 3 it prints an ALERT
and exits with code 3.`)
	var kf kafkaFlags
	kf.register(c.fs)
	threshold := c.fs.Float64("alert", skewAlert, "skew above which to alert (exit code 3)")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return c.usageErr(stderr, "want exactly one TOPIC, got %d arguments", len(pos))
	}
	if !(*threshold >= 1) {
		return c.usageErr(stderr, "--alert must be at least 1, got %v", *threshold)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	topic := pos[0]
	kc, adm, err := kf.connect(ctx)
	if err != nil {
		return c.fail(stderr, err)
	}
	defer kc.Close()
	counts, err := partitionCounts(ctx, adm, kf, topic)
	if err != nil {
		return c.fail(stderr, err)
	}
	sk := topology.SkewOf(topic, counts)
	total, maxCount, maxPart, mean := sk.Total, sk.Max, sk.MaxPartition, sk.Mean
	parts := make([]int32, 0, len(counts))
	for p := range counts {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PARTITION\tRECORDS\tOF MEAN\t")
	for _, p := range parts {
		rel := 0.0
		if mean > 0 {
			rel = float64(counts[p]) / mean
		}
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t\n", p, counts[p], rel)
	}
	tw.Flush()
	if total == 0 {
		fmt.Fprintf(stdout, "topic %s: %d partitions, no records: skew undefined\n", topic, len(counts))
		return exitOK
	}
	skew := sk.Ratio
	fmt.Fprintf(stdout, "topic %s: %d partitions, %d records, max %d (partition %d), mean %.1f, skew %.2f\n",
		topic, len(counts), total, maxCount, maxPart, mean, skew)
	if skew > *threshold {
		fmt.Fprintf(stdout, "ALERT: skew %.2f > %g on topic %s (partition %d holds %d of %d records): look for hot keys or a key with too few distinct values\n",
			skew, *threshold, topic, maxPart, maxCount, total)
		return exitSkew
	}
	return exitOK
}

// partitionCounts returns end - start offsets per partition of topic.
func partitionCounts(ctx context.Context, adm *kadm.Client, kf kafkaFlags, topic string) (map[int32]int64, error) {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	sk, err := topology.MeasureSkew(rctx, adm, topic)
	if errors.Is(err, topology.ErrUnknownTopic) {
		return nil, fmt.Errorf("topic %q does not exist on the broker (fencectl topology describe lists the declared topics)", topic)
	}
	if err != nil {
		return nil, err
	}
	return sk.Counts, nil
}
