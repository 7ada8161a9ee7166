package geofence

import "github.com/fencestream/fencestream/topology"

// Topic and group names of the visits example (processors/visits).
const (
	TopicVisits          = "fence-visits"
	GroupVisits          = "visits"
	TopicVisitsTable     = GroupVisits + "-table"
	GroupVisitStats      = "visit-stats"
	TopicVisitStatsLoop  = GroupVisitStats + "-loop"
	TopicVisitStatsTable = GroupVisitStats + "-table"
)

// visits declares the visits example: the visits group pairs each device's
// ENTER and EXIT per fence into visit records (device-keyed), and visit-stats
// re-keys ENTERs and visits by fence, across a declared boundary, into hourly
// windows.
func visits(n int32) ([]topology.Topic, []topology.Processor, []topology.Boundary) {
	topics := []topology.Topic{
		{Name: TopicVisits, Key: "device_id", Value: "fencestream.visits.v1.Visit", Partitions: n, Cleanup: topology.CleanupDelete,
			Doc: "completed visits (ENTER paired with EXIT) per device, in device order"},
		{Name: TopicVisitsTable, Key: "device_id", Value: "fencestream.visits.v1.DeviceVisits", Partitions: n, Cleanup: topology.CleanupCompact,
			Doc: "open visits per device"},
		topology.TimersTopic(GroupVisits, "device_id", n),
		{Name: TopicVisitStatsLoop, Key: "fence_id", Value: "fencestream.visits.v1.Visit", Partitions: n, Cleanup: topology.CleanupDelete,
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
			Group:   GroupVisitStats,
			Streams: []string{TopicTriggers, TopicVisits},
			Emits:   []string{topology.TopicDeadLetter},
			Loop:    TopicVisitStatsLoop,
			Table:   TopicVisitStatsTable,
			Timers:  timersStats,
			Flows: []topology.Flow{
				{From: TopicTriggers, To: TopicVisitStatsLoop},
				{From: TopicVisits, To: TopicVisitStatsLoop},
				{From: TopicVisitStatsLoop, To: TopicVisitStatsTable},
				{From: timersStats, To: TopicVisitStatsTable},
				{From: TopicTriggers, To: topology.TopicDeadLetter},
				{From: TopicVisits, To: topology.TopicDeadLetter},
				{From: TopicVisitStatsLoop, To: topology.TopicDeadLetter},
			},
			Doc: "hourly ENTER counts and mean dwell per fence, in windows on event time",
		},
	}
	lost := "per-device order across fences; order between devices of one fence beyond arrival order; a replay of either input may repeat records"
	bounds := []topology.Boundary{
		{Processor: GroupVisitStats, From: TopicTriggers, To: TopicVisitStatsLoop,
			Preserved: "per-(device, fence) order of ENTERs as the debouncer wrote them",
			Lost:      lost,
			Lag:       "windows take records up to their grace (10 min of stream time) after they end; later ones are counted as late and dropped; duplicates are dropped by id"},
		{Processor: GroupVisitStats, From: TopicVisits, To: TopicVisitStatsLoop,
			Preserved: "per-(device, fence) order of visits",
			Lost:      lost,
			Lag:       "as for ENTERs: grace 10 min, duplicates dropped by visit id"},
	}
	return topics, procs, bounds
}
