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
	GroupOccupancy       = "occupancy"
	TopicOccupancyLoop   = GroupOccupancy + "-loop"
	TopicOccupancy       = GroupOccupancy + "-table"
)

// Opt changes the declared geofencing topology.
type Opt func(*config)

type config struct{ partitions int32 }

// WithPartitions sets the partition count of every keyed topic (default 24).
// The choice is permanent for a cluster: Ensure refuses a broker that differs.
func WithPartitions(n int32) Opt { return func(c *config) { c.partitions = n } }

// Topology declares the fencestream pipeline: pings keyed by device into the
// debouncer, triggers keyed by device, and the occupancy processor re-keying them
// by fence across a declared ordering boundary.
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
			// Salting: a fence too big for one bounded record is spread over
			// fence_id#n parts (decided per record, recorded in hot-keys); its
			// count needs no order across devices.
			{Name: TopicOccupancyLoop, Key: "fence_id", Value: "fencestream.v1.Trigger", Partitions: n, Cleanup: topology.CleanupDelete, Salting: true,
				Doc: "triggers re-keyed by fence: the fence-ordered stream"},
			{Name: TopicOccupancy, Key: "fence_id", Value: "fencestream.v1.Occupancy", Partitions: n, Cleanup: topology.CleanupCompact, Salting: true,
				Doc: "occupancy per fence; a split fence's parts under fence_id#n"},
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
				Group:   GroupOccupancy,
				Streams: []string{TopicTriggers},
				Emits:   []string{topology.TopicDeadLetter, topology.TopicHotKeys}, // hot-keys: split decisions, metadata about a key (no flow of records)
				Loop:    TopicOccupancyLoop,
				Table:   TopicOccupancy,
				Flows: []topology.Flow{
					{From: TopicTriggers, To: TopicOccupancyLoop},
					{From: TopicOccupancyLoop, To: TopicOccupancy},
					{From: TopicOccupancyLoop, To: TopicOccupancyLoop}, // to a split fence's part
					{From: TopicTriggers, To: topology.TopicDeadLetter},
				},
				Doc: "counts devices per fence from triggers re-keyed by fence",
			},
		},
		Boundaries: []topology.Boundary{{
			Processor: GroupOccupancy,
			From:      TopicTriggers,
			To:        TopicOccupancyLoop,
			Preserved: "per-(device, fence) order as emitted by one debouncer instance: one device's triggers for one fence reach the same fence partition in the order they were written",
			Lost:      "per-device order across fences; any order across a rebalance of the debouncer (replays may repeat or interleave triggers); order between devices of one fence beyond arrival order",
			Lag:       "the fence-keyed stream lags the device stream independently; occupancy dedupes by trigger_id and per-(fence, device) HLC so counts stay exact",
		}},
	}
	vt, vp, vb := visits(n)
	t.Topics = append(t.Topics, vt...)
	t.Processors = append(t.Processors, vp...)
	t.Boundaries = append(t.Boundaries, vb...)
	return t
}
