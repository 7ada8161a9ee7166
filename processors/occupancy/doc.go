// Package occupancy counts the devices inside each fence from the debouncer's
// triggers.
//
// apply.go is the pure per-fence state logic ([Apply]); processor.go is the
// Goka group: input fence-triggers keyed by device_id, a loopback into
// occupancy-loop keyed by fence_id (the declared ordering boundary of the
// topology), and the group table occupancy-table keyed by fence_id holding
// one [geofencepb.Occupancy] per fence (a fence too big for one record is
// split into salted parts; parts.go routes to them and sums them); build.go
// and run.go build and run it
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
// # Bounded records (DESIGN rules 4 and 15)
//
// A record holds its current members plus a deduplication horizon, never the
// history, and never more than [Limits].MaxMembers members, so no record of
// occupancy-table exceeds [Limits.RecordBound] (80 KB with the defaults and
// the longest ids the key rules allow; typical ids give ~6 KB), below the
// stated [MaxRecordBytes] of 256 KiB and Kafka's 1 MB default.
//
// The horizon. A member that left is kept only while a replay could still
// deliver an older trigger for it. Time here is the triggers' HLC time (the
// HLC of the confirming ping: its upper bits are milliseconds), because the
// per-device HLC is what orders a member's triggers. Every record keeps
// watermark_hlc, the highest HLC it has applied. On every Apply, members that
// are outside and whose last_hlc is more than H ([Limits].Horizon, default
// [DefaultHorizon], 24 h) below the watermark are pruned, and pruned_hlc is
// raised to the highest last_hlc pruned. A trigger for a device the record
// does not hold is then:
//
//   - above pruned_hlc: new to the record (a first stay, or a stay after a
//     forgotten one, which it is newer than), and applied as usual;
//   - at or below pruned_hlc: Expired, dropped and counted
//     (expired_dropped). It may be a replayed trigger of a forgotten stay, so
//     it must not be applied: a stale EXIT cannot make the count negative (the
//     device is not held, so nothing is decremented) and a stale ENTER cannot
//     re-admit a device that left.
//
// So occupancy stays exact under duplicates, replays and reordering as long as
// every trigger reaches each record on its way less than H behind that
// record's watermark: then its device is still held, or any forgotten stay of
// it is older than the trigger. H must cover how far back a trigger can
// arrive: the debouncer and this processor replay from their last committed
// offsets (seconds) after a crash or rebalance, but a partition whose
// processor is down, a lagging debouncer partition, a catch-up in which
// fence-triggers partitions progress unevenly, or a foreign producer's device-time
// HLCs from buffered uploads all deliver triggers late, by as long as the
// outage or the buffering. 24 h covers a day of any of these; it costs only
// records (devices that left in the last 24 h), and records are bounded by
// splitting. A genuine first trigger later than that may be expired and its
// stay not counted; raise H (WithHorizon) before a rebuild from a longer
// retention.
//
// Splitting. A record that is full (MaxMembers members after pruning) when a
// device it does not hold arrives becomes split: salt_buckets is set (sticky),
// it admits no new device, and every trigger of a device it does not hold is
// a Forward to one of [SaltBuckets] salted parts, keys fence_id#0 …
// fence_id#31 for the fence's own record, chosen by hashing the device with
// the record's key ([PartKey]). A part is an ordinary record of the same fence
// and splits the same way (its children are numbered (n+1)*32+b, so keys grow
// by digits, not suffixes). The decision lives in the record itself, in the
// table and its changelog: a replay after a rebalance reads the same
// salt_buckets from the restored record, the bucket is a function of key and
// device, so every trigger of a device reaches the same record. Nothing is
// moved when a record splits: the devices it holds stay until they leave and
// are pruned, and after that a device's new triggers (newer than the pruned
// stay) go to its part. A device is therefore held by at most one record at a
// time, and the fence's count is the sum of its records' counts ([Total],
// which views use). A split is also recorded for other consumers, as rule 4
// asks: a HotKey (salted, salt_buckets) on the compacted hot-keys topic under
// "occupancy-table/<key>" and the metric fencestream_occupancy_splits_total.
// Order across a split fence's parts is lost, which occupancy does not need.
// A forwarded trigger costs one more pass through occupancy-loop per level.
package occupancy
