// Package windows is the kit's windowed operators on a group's keys: time
// windows (tumbling, hopping), sessions, sliding windows and stream-stream
// joins, with Kafka Streams' answers.
//
// Invariants:
//   - What an operator hands over is a function of the input records in
//     partition order only: lateness and closing are judged at the
//     partition's stream time at each record's arrival (or the key's timer's,
//     whichever comes first), never at when timers fire.
//   - An operator's state is a kitpb message inside the key's state
//     (WindowSet, JoinBuffer), written with the key's envelope: effectively
//     once, and what an emit hands over from it is recorded and replayed
//     like any handler's output.
//   - A key's windows, sessions and join records are bounded (the spec's
//     MaxWindows, MaxWindowsPerKey a join side).
//   - The operators use the group's public API only: their timers and their
//     late-record counts go through a group.Operator.
//
// # Windows: Kafka Streams' answers, and where they differ
//
// Time windows (NewWindows: tumbling, hopping), sessions (NewSessions) and
// sliding windows (NewSliding) give Kafka Streams' results for the same
// records in partition order: the same windows, aggregates folded in arrival
// order, the same records late, and each result stamped (Window.Time) as
// Kafka Streams stamps it, with the largest event time in the window (a
// session's end). EmitUpdates hands over what a windowed KTable forwards
// without a cache: every update, and for each session a merge absorbs a
// Removed result (Kafka Streams' tombstone, stamped with the old end) unless
// the merged session is the record's own [t, t]. EmitFinal hands over what
// emitStrategy(onWindowClose) or suppress(untilWindowCloses) forward, no
// tombstones. Tables transcribed from Kafka Streams' unit tests and ksqlDB's
// query-validation tests check this (windows_kstreams_test.go). The
// remaining differences, each for a reason:
//
//   - No caching of results. Kafka Streams' caching store (its default)
//     coalesces a window's updates between commits, so what it forwards
//     depends on commit timing; the kit hands over every update, as Kafka
//     Streams does without caching (its record cache, group.RecordCache, on
//     by default, coalesces only the table's writes, never what is handed
//     over). The last result of each window is the same.
//   - Closing on timers. Kafka Streams hands final results over only when a
//     record arrives; the kit also closes windows on a stream-time timer once
//     any key's record has moved the partition's stream time. The results are
//     the same, sooner.
//   - Order across windows. Within one record, Kafka Streams' order follows
//     its store iterator (forward or reverse, by store); the kit's is fixed:
//     time windows by start; sliding windows the updated ones by start, then
//     the previous record's right window, the record's left window, its right
//     window; a merge's Removed sessions before the merged one.
//   - Retention. Kafka Streams' stores expire by segment (RocksDB) or entry
//     (in-memory) from the latest time the store has seen; the kit keeps a
//     closed window exactly its Retention past its close. A session store's
//     retention R is SessionSpec.Retention R − Gap − Grace; sliding windows
//     keep Kafka Streams' default, 2·Difference + Grace (a window a Difference
//     past its close). A record reaching a session or window at the edge of
//     expiry can merge with it in one and not in the other.
//   - A "final" session can still change, as in Kafka Streams: with
//     Retention, a record within Gap of a closed session that is not itself
//     late (its merged session would still be open) merges it, and the merged
//     session is handed over again. With Retention 0 a closed session is
//     final.
//   - A bound per key. A key keeps at most its spec's MaxWindows (Bounded;
//     default MaxWindowsPerKey): a time-window spec whose worst case needs
//     more is refused when the group is built; sessions and sliding windows
//     beyond it drop the oldest (handed over first under EmitFinal). Kafka
//     Streams has none; the kit rewrites a key's windows with its state on
//     every record, so their number must stay known.
//   - No default grace. Kafka Streams' old default (24 h minus the size,
//     ksqlDB's default) or none (ofSizeWithNoGrace) are both spelled out in
//     the spec; a day of grace on short windows needs Bounded.
//   - An event time before the epoch is an error, not a late record.
//   - A Removed session carries its last aggregate (Kafka Streams' tombstone
//     has none); readers treat it as a deletion of (key, Start, End).
//   - State written before results carried a time: a window's Time is the
//     epoch until its next record, and a sliding window set's stored records
//     are replayed (in event-time order) into windows at their key's next
//     record or timer.
//
// # Stream-stream joins: what differs from Kafka Streams
//
// StreamJoin gives Kafka Streams' KStream-KStream join answers: JoinWindows
// with before, after (either may be 0 or negative) and grace; a left record at
// t joins the right records in [t-before, t+after], a right one the left
// records in [t-after, t+before]; an unmatched record is handed over alone
// (LeftJoin: left records; OuterJoin: both) once stream time is past its
// window's close (t+after+grace for a left record, t+before+grace for a
// right one: Kafka Streams' outer-join look-back), and a record stays
// joinable until t+before+after+grace (its window store's retention), so a
// record within grace joins one already handed over unmatched, as there. The
// conformance tables (streamjoin_conformance_test.go) transcribe
// KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest,
// KStreamKStreamOuterJoinTest and KStreamKStreamWindowCloseTest. What
// differs, and why:
//
//   - Late records. A record arriving after its window's close is late
//     (counted in fencestream_window_late_records_total and
//     JoinBuffer.late; AddLeft/AddRight return ErrLate), the verdict
//     KStreamKStreamWindowCloseTest checks. Kafka Streams' Javadoc says such
//     records are dropped; its code (KAFKA-16123) drops them only from its
//     window store, still joining them with what the other side's store
//     holds and, in a left/outer join, handing them over unmatched at once.
//     The kit does what the code does — the answers users of Kafka Streams
//     get — and does not hold the record.
//   - Out-of-order records within grace. Kafka Streams hands an unmatched
//     record over at once when its window's end (without grace) is already
//     behind stream time, so a record of the other side arriving within grace
//     can then pair with it too: both results for one record (KAFKA-19536;
//     its fix, apache/kafka#22410, is open). The kit holds it until its grace
//     ends: one or the other.
//   - Order across keys. Kafka Streams keeps the unmatched records of a
//     partition in one store ordered by (time, right before left, key), and
//     an arriving record first hands over every key's closed ones. The kit's
//     join state is per key (in the key's envelope, written by that key's
//     records only, which is what makes it effectively-once): a key's closed
//     records are handed over by its own next record, or by its timer, after
//     the arriving record's results. Each key's results are in Kafka
//     Streams' order (its closed records by time, right first on a tie; then
//     the arriving record's pairs); only their interleaving with other keys'
//     differs, and what is handed over does not.
//   - One stream time. Kafka Streams judges a record late by the time its own
//     side's window store has seen, and hands unmatched records over by the
//     task's time; the kit uses the partition's stream time for both (both
//     sides and every key: the group is co-partitioned), so a record made
//     late by the other side's records is late here, and held nowhere.
//   - Retention. Kafka Streams' RocksDB window store expires records by
//     segment (at least 60 s wide by default), so a late record may still
//     join records older than before+after+grace there; the kit's retention
//     is exact.
//   - Kafka Streams' internal emit interval (1 s of wall clock by default)
//     throttles when unmatched records come out; the kit hands them over when
//     stream time closes them (at a record of the key or its timer), never by
//     the wall clock. JoinWindows.of (no grace, results at once, spurious
//     left/outer results) is not offered.
//   - Results carry no timestamp of their own: Kafka Streams stamps a pair
//     with the later of its two times and an unmatched result with its
//     record's; pair receives both records and stamps what it writes from
//     them (time comes from the data).
//   - A record with a null or empty key never reaches the join: it is
//     dead-lettered, as every input is; Kafka Streams (KIP-962) hands a
//     left/outer join's null-key record over unmatched at once.
package windows
