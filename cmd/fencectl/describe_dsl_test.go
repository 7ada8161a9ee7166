package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
)

// fixCounts is a small DSL app: the pings with a fix, counted per device.
// It is linked here only, so the test holds whatever the stock modules are.
func fixCounts() host.Module {
	return streams.Module("fixcounts", []topology.Topic{
		{Name: "fix-counts-table", Key: "device_id", Value: "google.protobuf.Int64Value", Cleanup: topology.CleanupCompact},
		{Name: "fix-counts", Key: "device_id", Value: "google.protobuf.Int64Value", Cleanup: topology.CleanupDelete},
	}, func(b *streams.Builder) {
		b.Stream[geofencepb.Ping](geofence.TopicPings).
			Filter(func(_ string, p *geofencepb.Ping) bool { return p.GetAccuracyM() < 50 }).
			GroupByKey().
			Count("fix-counts").
			ToStream().To("fix-counts")
	})
}

// A module built on the DSL shows its operators after the composed
// topology (as Kafka Streams' Topology.describe()), and in mermaid its
// groups as subgraphs of the same flowchart, on the topology's topics.
func TestDescribeDSLModule(t *testing.T) {
	mods := append(modules.All(nil), fixCounts())
	out, errs := describeWith(t, mods, "--partitions", "4")
	wantContains(t, out,
		"fix-counts: ",                         // the group, in the composed topology
		"\nmodule fixcounts:\n  App fixcounts", // then the app
		"Group fix-counts: reads pings; writes fix-counts; table fix-counts-table",
		"Source pings (key device_id, fencestream.v1.Ping)",
		"--> filter",
		"--> count -> table fix-counts-table",
		"Table fix-counts-table (google.protobuf.Int64Value), on each update",
		"--> write fix-counts",
	)
	// Only the DSL apps draw their inside: fixcounts and the stock
	// devicestats (module devicehours), not the Processor API modules.
	if n := strings.Count(out, "\nmodule "); n != 2 || !strings.Contains(out, "\nmodule devicehours:\n") {
		t.Errorf("want two module sections (fixcounts, devicehours), got %d:\n%s", n, out)
	}
	if errs != "" {
		t.Errorf("stderr: %s", errs)
	}

	out, _ = describeWith(t, mods, "--format", "mermaid")
	if strings.Count(out, "flowchart") != 1 {
		t.Errorf("want one flowchart:\n%s", out)
	}
	wantContains(t, out,
		`t_fix_counts_table[("fix-counts-table<br/>key: device_id`, // the topology's node
		`subgraph app_fixcounts ["app fixcounts: operators"]`,
		`subgraph g_fix_counts ["group fix-counts"]`,
		"t_pings --> n1_fix_counts", // on the topology's topic nodes
		"--> t_fix_counts_table",
	)
	if strings.Contains(out, `t_pings[("pings")]`) {
		t.Errorf("the app redraws a topic the topology draws:\n%s", out)
	}
}

// A module whose Describe fails fails the command, naming the module.
func TestDescribeModuleError(t *testing.T) {
	broken := host.Define(host.Module{Name: "broken", Describe: func(*topology.Topology) (string, string, error) {
		return "", "", errors.New("no graph")
	}})
	var out, errw strings.Builder
	code := describeTopology(nil, modules.Base, append(modules.All(nil), broken), &out, &errw)
	if code != exitFailure || !strings.Contains(errw.String(), "module broken: no graph") {
		t.Fatalf("exit %d, stderr %q; want a failure naming module broken", code, errw.String())
	}
}

func describeWith(t *testing.T, mods []host.Module, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errw strings.Builder
	code := describeTopology(args, modules.Base, mods, &out, &errw)
	wantCode(t, code, exitOK, out.String(), errw.String())
	return out.String(), errw.String()
}
