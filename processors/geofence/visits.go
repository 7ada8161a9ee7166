package geofence

import "github.com/fencestream/fencestream/topology"

// Topic and group names of the visits example (processors/visits, a stream
// DSL app whose routing group is visit-rekey).
const (
	TopicVisits          = "fence-visits"
	GroupVisits          = "visits"
	TopicVisitsTable     = GroupVisits + "-table"
	GroupVisitRekey      = "visit-rekey"
	TopicVisitRekeyTable = GroupVisitRekey + "-table"
	TopicVisitsByFence   = "visits-by-fence"
	GroupVisitStats      = "visit-stats"
	TopicVisitStatsTable = GroupVisitStats + "-table"
)

// visits declares the visits example: the visits group pairs each device's
// ENTER and EXIT per fence into visit records (device-keyed), visit-rekey
// re-keys ENTERs and visits by fence, across a declared boundary, and
// visit-stats keeps them in hourly windows.
func visits(n int32) ([]topology.Topic, []topology.Processor, []topology.Boundary) {
	topics := []topology.Topic{
		{Name: TopicVisits, Key: "device_id", Value: "fencestream.visits.v1.Visit", Partitions: n, Cleanup: topology.CleanupDelete,
			Doc: "completed visits (ENTER paired with EXIT) per device, in device order"},
		{Name: TopicVisitsTable, Key: "device_id", Value: "fencestream.visits.v1.DeviceVisits", Partitions: n, Cleanup: topology.CleanupCompact,
			Doc: "open visits per device"},
		topology.TimersTopic(GroupVisits, "device_id", n),
		{Name: TopicVisitRekeyTable, Key: "device_id", Value: "google.protobuf.Empty", Partitions: n, Cleanup: topology.CleanupCompact,
			Doc: "visit-rekey's envelopes only (effectively-once re-keys)"},
		{Name: TopicVisitsByFence, Key: "fence_id", Value: "fencestream.visits.v1.Visit", Partitions: n, Cleanup: topology.CleanupDelete,
			Doc: "ENTERs (as open visits) and completed visits re-keyed by fence"},
		{Name: TopicVisitStatsTable, Key: "fence_id", Value: "fencestream.visits.v1.FenceVisits", Partitions: n, Cleanup: topology.CleanupCompact,
			Doc: "hourly ENTER counts and mean dwell per fence, last 24 hours"},
		topology.TimersTopic(GroupVisitStats, "fence_id", n),
	}
	timersVisits, timersStats := topology.TimersTopicName(GroupVisits), topology.TimersTopicName(GroupVisitStats)
	procs := []topology.Processor{
		{
			Group:   GroupVisits,
			Streams: []string{TopicTriggers},
			Emits:   []string{TopicVisits, topology.TopicDeadLetter},
			Table:   TopicVisitsTable,
			Timers:  timersVisits,
			Flows: []topology.Flow{
				{From: TopicTriggers, To: TopicVisitsTable},
				{From: TopicTriggers, To: TopicVisits},
				{From: TopicTriggers, To: topology.TopicDeadLetter},
				{From: timersVisits, To: TopicVisitsTable},
			},
			Doc: "pairs each device's ENTER and EXIT per fence into visits; open visits expire after 7 days of stream time",
		},
		{
			Group:   GroupVisitRekey,
			Streams: []string{TopicTriggers, TopicVisits},
			Emits:   []string{TopicVisitsByFence, topology.TopicDeadLetter},
			Table:   TopicVisitRekeyTable,
			Flows: []topology.Flow{
				{From: TopicTriggers, To: TopicVisitsByFence},
				{From: TopicVisits, To: TopicVisitsByFence},
				{From: TopicTriggers, To: topology.TopicDeadLetter},
				{From: TopicVisits, To: topology.TopicDeadLetter},
			},
			Doc: "re-keys ENTERs (as open visits) and visits by fence for visit-stats",
		},
		{
			Group:   GroupVisitStats,
			Streams: []string{TopicVisitsByFence},
			Emits:   []string{topology.TopicDeadLetter},
			Table:   TopicVisitStatsTable,
			Timers:  timersStats,
			Flows: []topology.Flow{
				{From: TopicVisitsByFence, To: TopicVisitStatsTable},
				{From: timersStats, To: TopicVisitStatsTable},
				{From: TopicVisitsByFence, To: topology.TopicDeadLetter},
			},
			Doc: "hourly ENTER counts and mean dwell per fence, in windows on event time",
		},
	}
	lost := "per-device order across fences; order between devices of one fence beyond arrival order; a replay of either input may repeat records"
	bounds := []topology.Boundary{
		{Processor: GroupVisitRekey, From: TopicTriggers, To: TopicVisitsByFence,
			Preserved: "per-(device, fence) order of ENTERs as the debouncer wrote them",
			Lost:      lost,
			Lag:       "windows take records up to their grace (10 min of stream time) after they end; later ones are counted as late and dropped; duplicates are dropped by id"},
		{Processor: GroupVisitRekey, From: TopicVisits, To: TopicVisitsByFence,
			Preserved: "per-(device, fence) order of visits",
			Lost:      lost,
			Lag:       "as for ENTERs: grace 10 min, duplicates dropped by visit id"},
	}
	return topics, procs, bounds
}
