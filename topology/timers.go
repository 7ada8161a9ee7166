package topology

// TimersTopicName is the name of a group's kit-owned timer topic. Goka allows
// one loop per group and forbids using the loop or table topic as an ordinary
// edge, so timer ticks travel on a topic of their own: the kit both produces
// to it and consumes it, keyed like the group table.
func TimersTopicName(group string) string { return group + "-timers" }

// TimersTopic declares a group's timer topic: keyed like the group table (key
// names the table's key) and co-partitioned with it, values
// fencestream.kit.v1.Tick. Set Processor.Timers to its name and add flows from
// it to whatever the timer handlers write.
func TimersTopic(group, key string, partitions int32) Topic {
	return Topic{Name: TimersTopicName(group), Key: key, Value: "fencestream.kit.v1.Tick", Partitions: partitions, Cleanup: CleanupDelete,
		Doc: "kit timer ticks of " + group + ": the wall clock decides when a key's due timers are looked at, the tick record decides what fires"}
}
