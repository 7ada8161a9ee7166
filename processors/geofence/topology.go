package geofence

import "github.com/fencestream/fencestream/topology"

// Topic and group names of the geofencing pipeline. Table and loop names follow
// Goka's "<group>-table" / "<group>-loop" convention.
const (
	TopicPings     = "pings"
	TopicFences    = "fences"
	TopicTriggers  = "fence-triggers"
	GroupDebouncer = "debouncer"
	TopicDebouncer = GroupDebouncer + "-table"
	// TopicDebouncerTimers carries the kit's timer ticks of the debouncer
	// (device silence timeouts).
	TopicDebouncerTimers = GroupDebouncer + "-timers"
	// GroupOccupancyMembers keeps each device's member register per fence
	// (key device_id) and sends what a trigger did to a fence's count to
	// occupancy-changes, re-keyed by fence: the ordering boundary.
	GroupOccupancyMembers = "occupancy-members"
	TopicOccupancyMembers = GroupOccupancyMembers + "-table"
	TopicOccupancyChanges = "occupancy-changes"
	// GroupOccupancy adds the changes up per fence.
	GroupOccupancy = "occupancy"
	TopicOccupancy = GroupOccupancy + "-table"
)

// Opt changes the declared geofencing topology.
type Opt func(*config)

type config struct{ partitions int32 }

// Partitions sets the partition count of every keyed topic (default 24).
// The choice is permanent for a cluster: Ensure refuses a broker that differs.
func Partitions(n int32) Opt { return func(c *config) { c.partitions = n } }

// Topology declares the fencestream pipeline: pings keyed by device into the
// debouncer, triggers keyed by device into occupancy-members (each device's
// member registers), and the count changes those decide, re-keyed by fence
// across a declared ordering boundary into occupancy's fence-keyed table.
func Topology(opts ...Opt) *topology.Topology {
	cfg := config{partitions: topology.DefaultPartitions}
	for _, o := range opts {
		o(&cfg)
	}
	n := cfg.partitions
	t := &topology.Topology{
		Name:            "geofence",
		KeyedPartitions: n,
		Topics: []topology.Topic{
			{Name: TopicPings, Key: "device_id", Value: "fencestream.v1.Ping", Partitions: n, Cleanup: topology.CleanupDelete,
				Doc: "GPS pings; per-device order is required, so hot devices are reported, never salted"},
			// One partition: the catalogue has one total order, so its version is one number.
			{Name: TopicFences, Key: "fence_id", Value: "fencestream.v1.Fence", Partitions: 1, Cleanup: topology.CleanupCompact,
				Doc: "fence catalogue; tombstone deletes; read whole by every debouncer"},
			{Name: TopicTriggers, Key: "device_id", Value: "fencestream.v1.Trigger", Partitions: n, Cleanup: topology.CleanupDelete,
				Doc: "debounced ENTER/EXIT/DWELL per device, in device order"},
			{Name: TopicDebouncer, Key: "device_id", Value: "fencestream.v1.DeviceState", Partitions: n, Cleanup: topology.CleanupCompact,
				Doc: "debounce state per device, co-located with the device's pings partition"},
			topology.TimersTopic(GroupDebouncer, "device_id", n),
			{Name: TopicOccupancyMembers, Key: "device_id", Value: "fencestream.v1.DeviceMembership", Partitions: n, Cleanup: topology.CleanupCompact,
				Doc: "occupancy's member register per device and fence, co-located with the device's triggers"},
			{Name: TopicOccupancyChanges, Key: "fence_id", Value: "fencestream.v1.OccupancyChange", Partitions: n, Cleanup: topology.CleanupDelete,
				Doc: "what each trigger did to its fence's count, re-keyed by fence: the fence-ordered stream"},
			{Name: TopicOccupancy, Key: "fence_id", Value: "fencestream.v1.Occupancy", Partitions: n, Cleanup: topology.CleanupCompact,
				Doc: "occupancy per fence: count, totals and a capped list of devices"},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Value: "raw bytes + reason header", Partitions: n, Cleanup: topology.CleanupDelete,
				Doc: "records that could not be processed, with the reason"},
			{Name: topology.TopicHotKeys, Key: "topic/key", Value: "fencestream.kit.v1.HotKey", Partitions: 1, Cleanup: topology.CleanupCompact,
				Doc: "producers' hot-key decisions: which keys were salted (order lost) or reported"},
		},
		Processors: []topology.Processor{
			{
				Group:     GroupDebouncer,
				Streams:   []string{TopicPings},
				Broadcast: []string{TopicFences},
				Emits:     []string{TopicTriggers, topology.TopicDeadLetter},
				Table:     TopicDebouncer,
				Timers:    TopicDebouncerTimers,
				Flows: []topology.Flow{
					{From: TopicPings, To: TopicDebouncer},
					{From: TopicPings, To: TopicTriggers},
					{From: TopicPings, To: topology.TopicDeadLetter},
					{From: TopicDebouncerTimers, To: TopicDebouncer},
					{From: TopicDebouncerTimers, To: TopicTriggers},
					{From: TopicDebouncerTimers, To: topology.TopicDeadLetter},
				},
				Doc: "debounces pings into triggers; state per device",
			},
			{
				Group:   GroupOccupancyMembers,
				Streams: []string{TopicTriggers},
				Emits:   []string{TopicOccupancyChanges, topology.TopicDeadLetter},
				Table:   TopicOccupancyMembers,
				Flows: []topology.Flow{
					{From: TopicTriggers, To: TopicOccupancyMembers},
					{From: TopicTriggers, To: TopicOccupancyChanges},
					{From: TopicTriggers, To: topology.TopicDeadLetter},
				},
				Doc: "applies triggers to each (device, fence) member register; a flip is a count change for the fence",
			},
			{
				Group:   GroupOccupancy,
				Streams: []string{TopicOccupancyChanges},
				Emits:   []string{topology.TopicDeadLetter},
				Table:   TopicOccupancy,
				Flows: []topology.Flow{
					{From: TopicOccupancyChanges, To: TopicOccupancy},
					{From: TopicOccupancyChanges, To: topology.TopicDeadLetter},
				},
				Doc: "adds the count changes up per fence",
			},
		},
		Boundaries: []topology.Boundary{{
			Processor: GroupOccupancyMembers,
			From:      TopicTriggers,
			To:        TopicOccupancyChanges,
			Preserved: "per-(fence-triggers partition, fence) order: one partition's changes for one fence reach the fence's partition in the order of their triggers (the group's producer keeps one request in flight)",
			Lost:      "per-device order across fences; order between partitions, and so between devices, of one fence",
			Lag:       "the fence-keyed stream lags the device stream independently; each device's member registers (per-(fence, device) HLC, last writer wins) decide the changes exactly once, and a fence drops a change re-sent after a crash by its source partition and offset, so counts stay exact",
		}},
	}
	vt, vp, vb := visits(n)
	t.Topics = append(t.Topics, vt...)
	t.Processors = append(t.Processors, vp...)
	t.Boundaries = append(t.Boundaries, vb...)
	return t
}
