// Package occupancy counts the devices inside each fence from the debouncer's
// triggers, in two groups:
//
//   - occupancy-members (processor.go, key device_id, co-partitioned with
//     fence-triggers) keeps each device's [geofencepb.DeviceMembership]: its
//     member register at every fence it is inside or left recently. A trigger
//     is applied to the register of its (device, fence) ([ApplyTrigger]);
//     when that flips the device in or out (or is a DWELL), what it did to
//     the fence's count goes on as an [geofencepb.OccupancyChange] to
//     occupancy-changes, keyed by fence_id: the declared ordering boundary of
//     the topology.
//   - occupancy (key fence_id) adds the changes up in occupancy-table, one
//     [geofencepb.Occupancy] per fence ([ApplyChange]).
//
// lag.go measures how far the table is behind the trigger stream.
//
// # Exact counts
//
// Triggers reach occupancy-members at least once, in device order except
// across a rebalance of the debouncer (replays may repeat or interleave a
// device's triggers). The registers therefore never depend on arrival order:
//
//   - Each (device, fence) is a [geofencepb.Member], a last-writer-wins
//     register ordered by the trigger's HLC. A trigger is applied only when
//     its HLC is above the member's last_hlc. Otherwise it changes nothing
//     but a counter: it is a duplicate when it is the member's last trigger
//     again (same type and HLC; the debouncer's trigger id is a function of
//     device, fence, type and HLC, and [checkAuthentic] holds every trigger
//     to it), and stale when it was overtaken (an older trigger arriving
//     late, or a replay of an earlier prefix).
//   - ENTER sets the member inside; EXIT, whatever its reason (CONFIRMED,
//     TIMEOUT, FENCE_DELETED), clears it; DWELL implies inside; CROSS (the
//     device passed the fence between two fixes) is valid but ignored
//     (result ignored): it says nothing about membership. The debouncer
//     fires DWELL only during a stay, so a DWELL whose ENTER was overtaken,
//     compacted or lost still proves the device is inside. With this rule a
//     member's state is a function of the highest-HLC trigger alone, so any
//     interleaving, duplication or replay of the same triggers converges to
//     the same registers.
//   - A change is sent only when a register flips (delta +1 or -1), or for a
//     DWELL (delta 0, counted as a dwell), so the changes of one (device,
//     fence) are exactly its flips. The kit's effectively-once outputs make a
//     redelivered trigger send the very same change again, never another.
//   - The fence's record applies each change once. A change carries where
//     its trigger was read (source partition and offset of fence-triggers);
//     the record keeps, per source partition, the next offset it expects
//     (source_next) and drops a change below it as a duplicate. That is right
//     because one source partition's changes for one fence are written in
//     offset order (one partition is processed in order, and the producer
//     sends no partition's next batch before the last one is answered:
//     sarama's partition muting, since 1.48, and group.OrderedOutputs; so a
//     retried batch cannot land after a later one, which
//     TestOccupancyCountsExactUnderProduceRetries checks with a broker that
//     holds and fails requests), and a change sent again
//     — after a crash, or by the next owner of a partition that moved — is
//     one already sent before every later change of its partition. So count
//     moves only on flips, by one, exactly once each: it is exact and never
//     negative, and count == enters_total - exits_total.
//   - devices lists inside devices in id order while there is room (at most
//     DevicesCap): every device inside as long as count has stayed within
//     the cap; once it has not, a sample of them (a device that entered
//     while the list was full is listed when its DWELL finds room). count
//     stays exact whatever the cap.
//   - catalogue_version is the highest catalogue version of any change seen;
//     last_change_ms the highest event time of a change that moved the count.
//
// # Bounded records (DESIGN rules 4 and 15)
//
// No record grows with history, and neither needs salting:
//
//   - A fence's record holds a count, totals, at most DevicesCap listed
//     devices and one offset per fence-triggers partition, however many
//     devices the fence has seen or holds.
//   - A device's record holds at most [Limits].MaxMembers members: the fences
//     it is inside, plus those it left within the horizon. A member that
//     left is kept only while a replay could still deliver an older trigger
//     for it: on every applied trigger, members that are outside and whose
//     last_hlc is more than H ([Limits].Horizon, default [DefaultHorizon],
//     24 h) below the device's watermark are forgotten, and pruned_hlc is
//     raised to the highest last_hlc forgotten. When the record is full and a
//     trigger comes for another fence, the member left longest ago (before
//     that trigger) is forgotten the same way; when there is none — the
//     device is inside MaxMembers fences — the trigger is dead-lettered
//     (reason member-limit) and nothing changes. A trigger for a fence the
//     record does not hold is then: above pruned_hlc, new (a first stay, or
//     a stay after a forgotten one, which it is newer than) and applied; at
//     or below, Expired: dropped and counted (expired_dropped), since it may
//     be a replayed trigger of a forgotten stay — a stale EXIT must not
//     decrement, a stale ENTER must not re-admit.
//   - A trigger whose HLC is beyond the clock plus the group's maximum skew
//     (group.MaxClockSkew, the binaries' --max-clock-skew) is dead-lettered
//     (reason future-hlc) and nothing changes: a register keeps a member by
//     its last HLC, so one clock a year ahead would otherwise hold the
//     device at its fence for a year.
//
// So occupancy stays exact under duplicates, replays and reordering as long as
// every trigger reaches its device's record less than H behind the device's
// watermark (one device's triggers come in HLC order from the debouncer, so
// only a replay or a foreign producer's buffered uploads arrive late), and a
// device is inside at most MaxMembers fences at once. A genuine first trigger
// later than that may be expired and its stay not counted; raise H
// (Horizon) before a rebuild from a longer retention.
//
// Records written before occupancy-members existed held the members in the
// fence's record and split full ones into salted parts (parts.go reads
// them); their counts do not carry over to the registers, so upgrading
// resets both groups and replays fence-triggers (cmd/OPERATING.md).
package occupancy
