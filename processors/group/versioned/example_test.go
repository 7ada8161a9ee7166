package versioned_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/versioned"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// A versioned table and a stream-table join as of the stream record's time
// (Kafka Streams' versioned stores, KIP-889 and KIP-914): fence-versions
// keeps each fence's definitions for a day, valid from their records'
// timestamps; enter-names joins each ENTER (keyed by fence) with the fence
// as it was at the ENTER's event time. An ENTER that arrives after the fence
// changed still gets the definition it happened under.
func Example_versionedJoin() {
	const (
		changes  = "fence-changes" // fence definitions keyed by fence, read
		enters   = "fence-enters"  // ENTER triggers keyed by fence, read
		versions = "fence-versions"
		namer    = "enter-names"
	)
	topics := func(name, value string, cleanup topology.Cleanup) topology.Topic {
		return topology.Topic{Name: name, Key: "fence_id", Value: value, Partitions: 1, Cleanup: cleanup}
	}
	topo := &topology.Topology{
		Name: "example",
		Topics: []topology.Topic{
			topics(changes, "fencestream.kit.test.v1.Fence", topology.CleanupCompact),
			topics(versions+"-table", "fencestream.kit.v1.VersionSet", topology.CleanupCompact),
			topics(enters, "fencestream.kit.test.v1.Trigger", topology.CleanupDelete),
			topics(namer+"-table", "fencestream.kit.test.v1.Occupancy", topology.CleanupCompact),
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 1, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{
			{Group: versions, Streams: []string{changes}, Emits: []string{topology.TopicDeadLetter}, Table: versions + "-table"},
			{Group: namer, Streams: []string{enters}, Joins: []string{versions + "-table"}, Emits: []string{topology.TopicDeadLetter}, Table: namer + "-table"},
		},
	}
	log := slog.New(slog.DiscardHandler)
	set := func(st *kitpb.VersionSet) *kitpb.VersionSet { return st }

	// The versioned table: the group's state is the version set itself.
	type vctx = group.Context[kitpb.VersionSet, *kitpb.VersionSet]
	vg := group.New[kitpb.VersionSet](topo, versions, log)
	fences := versioned.NewTable[testpb.Fence](vg, "fences", versioned.Spec{History: 24 * time.Hour}, set)
	group.Stream(vg, changes, func(c *vctx, f *testpb.Fence) error {
		st := c.State()
		if st == nil {
			st = &kitpb.VersionSet{}
		}
		if err := fences.Put(c, st, c.Timestamp(), f); err != nil {
			return err // older than the history: dead-lettered
		}
		c.SetState(st)
		return nil
	})

	// The join: each ENTER reads the fence valid at its event time.
	type nctx = group.Context[testpb.Occupancy, *testpb.Occupancy]
	ng := group.New[testpb.Occupancy](topo, namer, log)
	fenceAt := versioned.Join[testpb.Fence](ng, versions+"-table", set)
	group.Stream(ng, enters, func(c *nctx, t *testpb.Trigger) error {
		at := time.UnixMilli(t.GetEventTimeMs())
		err := fenceAt.Left(c, at, func(v versioned.Version[testpb.Fence, *testpb.Fence]) error {
			if !v.Found() {
				fmt.Printf("%s entered %s at %s: no such fence then\n", t.GetDeviceId(), c.Key(), at.UTC().Format("15:04"))
				return nil
			}
			fmt.Printf("%s entered %q at %s (definition valid from %s)\n", t.GetDeviceId(), v.Value.GetName(), at.UTC().Format("15:04"), v.ValidFrom.UTC().Format("15:04"))
			return nil
		})
		if err != nil {
			return err
		}
		st := c.State()
		if st == nil {
			st = &testpb.Occupancy{FenceId: c.Key()}
		}
		st.EntersTotal++
		c.SetState(st)
		return nil
	})

	tt := tester.New(exampleT{})
	for _, g := range []interface {
		Processor(context.Context, cluster.Config, ...group.Opt) (*group.Processor, error)
	}{vg, ng} {
		proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
		if err != nil {
			fmt.Println(err)
			return
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- proc.Run(runCtx) }()
		defer func() { stop(); <-done }()
	}
	t0 := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	fence := func(name string, at time.Duration) {
		tt.Consume(changes, "depot", &testpb.Fence{FenceId: "depot", Name: name, RadiusM: 50}, tester.WithTime(t0.Add(at)))
	}
	enter := func(device string, at time.Duration) {
		tt.Consume(enters, "depot", &testpb.Trigger{DeviceId: device, FenceId: "depot", Type: testpb.TriggerType_TRIGGER_TYPE_ENTER, EventTimeMs: t0.Add(at).UnixMilli()})
	}
	fence("Depot, old gate", 0)
	fence("Depot, new gate", time.Hour)
	enter("car-1", 90*time.Minute)
	enter("car-2", 40*time.Minute) // arrives late: the old gate was live then
	enter("car-3", -time.Hour)
	// Output:
	// car-1 entered "Depot, new gate" at 09:30 (definition valid from 09:00)
	// car-2 entered "Depot, old gate" at 08:40 (definition valid from 08:00)
	// car-3 entered depot at 07:00: no such fence then
}
