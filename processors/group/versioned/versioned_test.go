package versioned_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/versioned"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// The versioned-table tests' topology: vt-writer keeps, per device, the
// versions of the fence it is assigned to (changes: triggers on
// vt-changes, event time = the change's time; a FENCE_DELETED reason is a
// delete) in a versioned table; vt-joiner joins each ping of vt-pings with
// that table as of the ping's device time and emits the result to
// vt-joined.
const (
	vtWriter  = "vt-writer"
	vtJoiner  = "vt-joiner"
	vtChanges = "vt-changes"
	vtPings   = "vt-pings"
	vtJoined  = "vt-joined"
)

func versionedTopology(parts int32) *topology.Topology {
	return &topology.Topology{
		Name: "versionedtest",
		Topics: []topology.Topic{
			{Name: vtChanges, Key: "device_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: parts, Cleanup: topology.CleanupDelete},
			{Name: vtWriter + "-table", Key: "device_id", Value: "fencestream.kit.v1.VersionSet", Partitions: parts, Cleanup: topology.CleanupCompact},
			{Name: vtPings, Key: "device_id", Value: "fencestream.kit.test.v1.Ping", Partitions: parts, Cleanup: topology.CleanupDelete},
			{Name: vtJoined, Key: "device_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: parts, Cleanup: topology.CleanupDelete},
			{Name: vtJoiner + "-table", Key: "device_id", Value: "fencestream.kit.test.v1.DeviceState", Partitions: parts, Cleanup: topology.CleanupCompact},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw", Partitions: parts, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{
			{Group: vtWriter, Streams: []string{vtChanges}, Emits: []string{topology.TopicDeadLetter}, Table: vtWriter + "-table"},
			{Group: vtJoiner, Streams: []string{vtPings}, Joins: []string{vtWriter + "-table"}, Emits: []string{vtJoined, topology.TopicDeadLetter}, Table: vtJoiner + "-table"},
		},
	}
}

type (
	vsCtx   = group.Context[kitpb.VersionSet, *kitpb.VersionSet]
	joinCtx = group.Context[testpb.DeviceState, *testpb.DeviceState]
	fenceV  = versioned.Version[testpb.Trigger, *testpb.Trigger]
)

func identitySet(s *kitpb.VersionSet) *kitpb.VersionSet { return s }

// versionedGroups builds both groups. asOf false makes the joiner read the
// latest version instead (what a join of a plain table does), for the
// tests to show they tell the two apart.
func versionedGroups(topo *topology.Topology, spec versioned.Spec, asOf bool) (writer *group.Group[kitpb.VersionSet, *kitpb.VersionSet], joiner *group.Group[testpb.DeviceState, *testpb.DeviceState], expired *sync.Map) {
	expired = &sync.Map{}
	writer = group.New[kitpb.VersionSet](topo, vtWriter, quiet)
	vt := versioned.NewTable[testpb.Trigger](writer, "fences", spec, identitySet)
	group.Stream(writer, vtChanges, func(c *vsCtx, t *testpb.Trigger) error {
		st := c.State()
		if st == nil {
			st = &kitpb.VersionSet{}
		}
		var err error
		if t.GetReason() == testpb.TriggerReason_TRIGGER_REASON_FENCE_DELETED {
			err = vt.Delete(c, st, c.EventTime())
		} else {
			err = vt.Put(c, st, c.EventTime(), t)
		}
		if errors.Is(err, versioned.ErrBeyondHistory) {
			expired.Store(fmt.Sprintf("%s@%d", c.Key(), t.GetEventTimeMs()), true)
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(t *testpb.Trigger) time.Time { return time.UnixMilli(t.GetEventTimeMs()) }))

	joiner = group.New[testpb.DeviceState](topo, vtJoiner, quiet)
	fences := versioned.Join[testpb.Trigger](joiner, vtWriter+"-table", identitySet)
	out := group.Output[testpb.Trigger](joiner, vtJoined)
	group.Stream(joiner, vtPings, func(c *joinCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &testpb.DeviceState{DeviceId: c.Key()}
		}
		st.Pings++
		c.SetState(st)
		at := time.UnixMilli(p.GetDeviceTimeMs())
		if !asOf {
			at = time.UnixMilli(1 << 50) // the latest version, whatever the ping's time
		}
		emit := func(kind string) func(v fenceV) error {
			return func(v fenceV) error {
				fence := "-"
				if v.Found() {
					fence = v.Value.GetFenceId()
				}
				if v.Beyond {
					fence = "beyond"
				}
				out.Emit(c, c.Key(), &testpb.Trigger{TriggerId: fmt.Sprintf("%s|%s|%d|%s", kind, c.Key(), p.GetDeviceTimeMs(), fence), DeviceId: c.Key(), FenceId: fence, EventTimeMs: p.GetDeviceTimeMs()})
				return nil
			}
		}
		if _, err := fences.Inner(c, at, emit("inner")); err != nil {
			return err
		}
		return fences.Left(c, at, emit("left"))
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	return writer, joiner, expired
}

// t0 is event time two days back: stream time never runs ahead of the wall
// clock, so event times must be in the past.
func versionedT0() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour) }

func change(t0 time.Time, device, fence string, at time.Duration) *testpb.Trigger {
	return &testpb.Trigger{TriggerId: fmt.Sprintf("%s|%s|%d", device, fence, at.Milliseconds()), DeviceId: device, FenceId: fence, EventTimeMs: t0.Add(at).UnixMilli()}
}

func deletion(t0 time.Time, device string, at time.Duration) *testpb.Trigger {
	return &testpb.Trigger{DeviceId: device, Reason: testpb.TriggerReason_TRIGGER_REASON_FENCE_DELETED, EventTimeMs: t0.Add(at).UnixMilli()}
}

func ping(t0 time.Time, device string, at time.Duration) *testpb.Ping {
	return &testpb.Ping{DeviceId: device, DeviceTimeMs: t0.Add(at).UnixMilli()}
}

// joinedIDs drains the joined topic's tracker into "kind|+offset|fence"
// strings (offsets from t0 in minutes).
func joinedIDs(t *testing.T, q *tester.QueueTracker, t0 time.Time) []string {
	t.Helper()
	var out []string
	for {
		_, v, ok := q.Next()
		if !ok {
			return out
		}
		tr := v.(*testpb.Trigger)
		kind, _, _ := strings.Cut(tr.GetTriggerId(), "|")
		out = append(out, fmt.Sprintf("%s +%dm %s", kind, time.UnixMilli(tr.GetEventTimeMs()).Sub(t0)/time.Minute, tr.GetFenceId()))
	}
}

// A ping joins the version of the table valid at its own time: a late ping
// (its time before the latest change) joins the fence live then, not
// today's; a late change (its time before the latest) becomes history in its
// place; a delete is a version too; a ping older than the history kept
// finds nothing (counted), unless the latest version covers it.
func TestVersionedJoinAsOf(t *testing.T) {
	got, reg := runVersionedScenario(t, true)
	want := []string{
		"inner +5m fence-v1", "left +5m fence-v1", // late: v2 is already in the table
		"inner +15m fence-v2", "left +15m fence-v2",
		"left +-1m -",                               // before the first version: left only
		"inner +8m fence-v1b", "left +8m fence-v1b", // the late change at +7m
		"inner +6m fence-v1", "left +6m fence-v1",
		"left +25m -", // deleted at +20m
		"inner +18m fence-v2", "left +18m fence-v2",
		"left +30m beyond", // history is 1h; the latest change is at +3h
		"inner +200m fence-v3", "left +200m fence-v3",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("joined:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if n, _ := counterValue(t, reg, "fencestream_versioned_records_total", map[string]string{"group": vtJoiner, "table": vtWriter + "-table", "result": "beyond-history"}); n != 2 {
		t.Fatalf("beyond-history reads counted %v, want 2 (inner and left)", n)
	}
	if n, _ := counterValue(t, reg, "fencestream_versioned_records_total", map[string]string{"group": vtWriter, "table": "fences", "result": "expired"}); n != 1 {
		t.Fatalf("expired puts counted %v, want 1", n)
	}
}

// The same scenario joined with the latest version: the late pings take
// today's fence. The as-of test above must tell the two apart.
func TestVersionedJoinLatestDiffers(t *testing.T) {
	got, _ := runVersionedScenario(t, false)
	if !slices.Contains(got, "inner +5m fence-v2") {
		t.Fatalf("a join with the latest version should give the late ping v2: %q", got)
	}
}

func runVersionedScenario(t *testing.T, asOf bool) ([]string, *prometheus.Registry) {
	t.Helper()
	topo := versionedTopology(2)
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	writer, joiner, expired := versionedGroups(topo, versioned.Spec{History: time.Hour, MaxVersions: 8}, asOf)
	tt := tester.New(t)
	reg := prometheus.NewRegistry()
	for _, g := range []interface {
		Processor(context.Context, cluster.Config, ...group.Opt) (*group.Processor, error)
	}{writer, joiner} {
		p, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Registerer(reg))
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, p.Run)
	}
	q := tt.NewQueueTracker(vtJoined)
	t0 := versionedT0()
	tt.Consume(vtChanges, "d1", change(t0, "d1", "fence-v1", 0))
	tt.Consume(vtChanges, "d1", change(t0, "d1", "fence-v2", 10*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 5*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 15*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", -time.Minute))
	tt.Consume(vtChanges, "d1", change(t0, "d1", "fence-v1b", 7*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 8*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 6*time.Minute))
	tt.Consume(vtChanges, "d1", deletion(t0, "d1", 20*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 25*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 18*time.Minute))
	tt.Consume(vtChanges, "d1", change(t0, "d1", "fence-v3", 3*time.Hour))
	tt.Consume(vtChanges, "d1", change(t0, "d1", "fence-too-late", 30*time.Minute)) // older than 3h - 1h: dropped
	tt.Consume(vtPings, "d1", ping(t0, "d1", 30*time.Minute))
	tt.Consume(vtPings, "d1", ping(t0, "d1", 200*time.Minute))
	if _, ok := expired.Load(fmt.Sprintf("d1@%d", t0.Add(30*time.Minute).UnixMilli())); !ok {
		t.Error("the put older than the history was not reported to the handler")
	}
	return joinedIDs(t, q, t0), reg
}

// Lookup reads a versioned table for any key, as of a time: here a
// group keyed by fleet reads each ping's device's fence as of the ping.
func TestVersionedLookupAsOf(t *testing.T) {
	const looker, lookups = "vt-looker", "vt-lookups"
	topo := versionedTopology(2)
	topo.Topics = append(topo.Topics, topology.Topic{Name: lookups, Key: "fleet_id", Value: "fencestream.kit.test.v1.Ping", Partitions: 3, Cleanup: topology.CleanupDelete},
		topology.Topic{Name: looker + "-table", Key: "fleet_id", Value: "fencestream.kit.test.v1.DeviceState", Partitions: 3, Cleanup: topology.CleanupCompact})
	topo.Processors = append(topo.Processors, topology.Processor{Group: looker, Streams: []string{lookups}, Lookups: []string{vtWriter + "-table"}, Emits: []string{topology.TopicDeadLetter}, Table: looker + "-table"})
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	writer, _, _ := versionedGroups(topo, versioned.Spec{History: time.Hour}, true)
	type lctx = group.Context[testpb.DeviceState, *testpb.DeviceState]
	lg := group.New[testpb.DeviceState](topo, looker, quiet)
	fences := versioned.Lookup[testpb.Trigger](lg, vtWriter+"-table", identitySet)
	var mu sync.Mutex
	var got []string
	group.Stream(lg, lookups, func(c *lctx, p *testpb.Ping) error {
		v, err := fences.AsOfKey(c, p.GetDeviceId(), time.UnixMilli(p.GetDeviceTimeMs()))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%s/%s: %s", c.Key(), p.GetDeviceId(), v.Value.GetFenceId()))
		return nil
	})
	tt := tester.New(t)
	for _, g := range []interface {
		Processor(context.Context, cluster.Config, ...group.Opt) (*group.Processor, error)
	}{writer, lg} {
		p, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, p.Run)
	}
	t0 := versionedT0()
	tt.Consume(vtChanges, "d1", change(t0, "d1", "a", 0))
	tt.Consume(vtChanges, "d1", change(t0, "d1", "b", 10*time.Minute))
	tt.Consume(vtChanges, "d2", change(t0, "d2", "c", 0))
	tt.Consume(lookups, "fleet-1", ping(t0, "d1", 5*time.Minute))
	tt.Consume(lookups, "fleet-1", ping(t0, "d1", 11*time.Minute))
	tt.Consume(lookups, "fleet-2", ping(t0, "d2", 11*time.Minute))
	tt.Consume(lookups, "fleet-2", ping(t0, "d3", 11*time.Minute))
	want := []string{"fleet-1/d1: a", "fleet-1/d1: b", "fleet-2/d2: c", "fleet-2/d3: "}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("looked up %q, want %q", got, want)
	}
}
