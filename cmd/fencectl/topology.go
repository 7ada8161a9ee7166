package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
)

func runTopology(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "fencectl topology", "missing subcommand: describe or check")
	}
	switch args[0] {
	case "describe":
		return runTopologyDescribe(args[1:], stdout, stderr)
	case "check":
		return runTopologyCheck(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "Usage: fencectl topology describe|check [flags]")
		return exitOK
	}
	return usageError(stderr, "fencectl topology", "unknown subcommand %q (want describe or check)", args[0])
}

func runTopologyDescribe(args []string, stdout, stderr io.Writer) int {
	return describeTopology(args, modules.Base, modules.All(nil), stdout, stderr)
}

// describeTopology prints base extended by mods, then the inside of each
// module that draws one (host.Module.Describe: a DSL app's operators).
func describeTopology(args []string, base func(partitions int32) *topology.Topology, mods []host.Module, stdout, stderr io.Writer) int {
	c := newCommand("topology describe", "topology describe [--format text|mermaid] [--partitions N]",
		`Prints the declared geofencing topology: topics with key, value, partitions and cleanup policy,
processors, and the declared re-key boundaries with the order they keep and lose. A module
built on the DSL (processors/group/streams) then shows its groups' operators, as Kafka
Streams' Topology.describe(); in mermaid, as subgraphs of the one flowchart.`)
	format := c.fs.String("format", "text", "output format: text or mermaid")
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
	if *format != "text" && *format != "mermaid" {
		return c.usageErr(stderr, "--format %q: want text or mermaid", *format)
	}
	topo, err := host.Compose(base(int32(*partitions)), mods...)
	if err != nil {
		return c.fail(stderr, err)
	}
	var sb strings.Builder
	if *format == "text" {
		sb.WriteString(topo.Describe())
	} else {
		sb.WriteString(topo.Mermaid())
	}
	for _, m := range mods {
		if m.Describe == nil {
			continue
		}
		text, mermaid, err := m.Describe(topo)
		if err != nil {
			return c.fail(stderr, fmt.Errorf("module %s: %w", m.Name, err))
		}
		if *format == "mermaid" {
			sb.WriteString(mermaid)
			continue
		}
		fmt.Fprintf(&sb, "\nmodule %s:\n", m.Name)
		for _, l := range strings.SplitAfter(strings.TrimRight(text, "\n"), "\n") {
			sb.WriteString("  " + l)
		}
		sb.WriteString("\n")
	}
	io.WriteString(stdout, sb.String())
	return exitOK
}

func runTopologyCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("topology check", "topology check --brokers B [--create] [--partitions N]",
		`Compares the broker's topics with the declared topology: partition counts and cleanup
policies. Each mismatch is printed and the exit code is 1. With --create, missing
topics are created first (existing ones are never changed).`)
	var kf kafkaFlags
	kf.register(c.fs)
	create := c.fs.Bool("create", false, "create missing topics with their declared partitions and cleanup policy")
	replication := c.fs.Int("replication", -1, "replication factor of created topics (-1: the broker's default)")
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
	if *replication == 0 || *replication < -1 || *replication > 32767 {
		return c.usageErr(stderr, "--replication must be -1 or positive, got %d", *replication)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	kc, adm, err := kf.connect(ctx)
	if err != nil {
		return c.fail(stderr, err)
	}
	defer kc.Close()
	topo, err := modules.Topology(int32(*partitions))
	if err != nil {
		return c.fail(stderr, err)
	}
	// Creating topics waits for them to appear; give it more than one round trip.
	cctx, cancel := context.WithTimeout(ctx, 3*kf.timeout)
	defer cancel()
	if *create {
		err = topo.Ensure(cctx, adm, topology.Replication(int16(*replication)))
	} else {
		err = topo.Check(cctx, adm)
	}
	mismatches := mismatchesOf(err)
	if err != nil && len(mismatches) == 0 {
		return c.fail(stderr, err)
	}
	for _, m := range mismatches {
		fmt.Fprintf(stdout, "MISMATCH %s\n", m.Error())
	}
	if len(mismatches) > 0 {
		fmt.Fprintf(stderr, "fencectl topology check: %d mismatch(es) between broker %s and the declared topology (partitions %d)\n", len(mismatches), kf.brokers(), *partitions)
		return exitFailure
	}
	printTopics(ctx, stdout, adm, topo, kf)
	fmt.Fprintf(stdout, "ok: broker %s matches the declared topology (%d topics)\n", kf.brokers(), len(topo.Topics))
	return exitOK
}

// printTopics lists the declared topics as the broker has them.
func printTopics(ctx context.Context, w io.Writer, adm *kadm.Client, topo *topology.Topology, kf kafkaFlags) {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	details, err := adm.ListTopics(rctx, topo.TopicNames()...)
	if err != nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tCLEANUP\tKEY")
	for _, name := range topo.TopicNames() {
		tp := topo.MustTopic(name)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", name, len(details[name].Partitions), tp.Cleanup, tp.Key)
	}
	tw.Flush()
}

// mismatchesOf collects the MismatchErrors of a (possibly joined) error.
func mismatchesOf(err error) []*topology.MismatchError {
	var out []*topology.MismatchError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if m, ok := err.(*topology.MismatchError); ok {
			out = append(out, m)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	if len(out) == 0 {
		var m *topology.MismatchError
		if errors.As(err, &m) {
			out = append(out, m)
		}
	}
	return out
}
