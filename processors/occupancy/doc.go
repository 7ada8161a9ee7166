// Package occupancy counts the devices inside each fence from the debouncer's
// triggers.
//
// apply.go is the pure per-fence state logic ([Apply]); processor.go is the
// Goka group: input fence-triggers keyed by device_id, a loopback into
// occupancy-loop keyed by fence_id (the declared ordering boundary of the
// topology), and the group table occupancy-table keyed by fence_id holding
// one [geofencepb.Occupancy] per fence; build.go and run.go build and run it
// against a broker; lag.go measures how far the table is behind the trigger
// stream.
//
// Across the boundary only per-(device, fence) order survives, and even that
// not across a rebalance of the debouncer; delivery is at least once. The
// state therefore never depends on arrival order:
//
//   - Each (fence, device) is a [geofencepb.Member], a last-writer-wins register
//     ordered by the trigger's HLC. A trigger is applied only when its HLC is
//     above the member's last_hlc. Otherwise it changes nothing but a counter:
//     it is a duplicate when its trigger_id is the member's last_trigger_id (a
//     re-delivery of the last applied trigger), and stale when it was overtaken
//     (an older trigger arriving late, or a replay of an earlier prefix).
//   - ENTER sets the member inside; EXIT, whatever its reason (CONFIRMED,
//     TIMEOUT, FENCE_DELETED), clears it; DWELL implies inside. The debouncer
//     fires DWELL only during a stay, so a DWELL whose ENTER was overtaken,
//     compacted or lost still proves the device is inside. With this rule a
//     member's state is a function of the highest-HLC trigger alone, so any
//     interleaving, duplication or replay of the same triggers converges to the
//     same state. (Ignoring such a DWELL instead would leave the device outside
//     when DWELL overtakes its ENTER and the ENTER then arrives stale.)
//   - count is the number of members inside. It moves only when a member flips
//     between outside and inside, never by ±1 on a trigger's type, so it is
//     exact and never negative; count == enters_total - exits_total, where
//     the totals count those flips.
//   - devices is the sorted list of the first min(count, cap) inside devices,
//     for display; count stays exact when it is capped.
//   - catalogue_version is the highest catalogue version of any valid trigger
//     seen; last_change_ms the highest event time of a trigger that flipped a
//     member.
//
// Members are kept after they leave: a member's last_hlc is what makes a late
// ENTER of a finished stay stale instead of re-admitting the device.
package occupancy
