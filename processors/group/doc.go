// Package group builds and runs Goka processor groups from a declared topology:
// the plumbing every fencestream processor (and any user's processor) shares.
//
// Invariants:
//   - Every processor, view and emitter it builds hashes keys with the pinned
//     murmur2 partitioner (topology.NewHasher); none can fall back to FNV-1a.
//   - A group's Goka edges are exactly the topics its topology declaration names,
//     and the declaration always lists the dead-letter topic; anything else
//     refuses to build. The topology is validated the same way under Goka's
//     tester as against a broker.
//   - No input stops a processor: an empty or malformed key, undecodable bytes,
//     an empty value on an ordered stream, a handler's panic or a record the
//     handler rejects goes to the dead-letter topic with its original key and
//     value and a reason header, and the next record flows. A dead letter too
//     large to send whole (Producer.MaxMessageBytes, the dead-letter topic's
//     max.message.bytes less a batch header) is sent cut down: prefixes of at
//     most CutKeyBytes and CutValueBytes, the source and reason headers, and
//     HeaderCutDown with the sizes (HeaderKeyBytes, HeaderValueBytes); one the
//     broker refuses for its size anyway is sent again cut down, once.
//   - No log line carries an unbounded key or value: the kit logs through
//     BoundedLogger (each attribute at most LogValueLimit bytes) and shows
//     keys as topology.KeyExcerpt.
//   - Consumer groups start at the oldest offset and local state lives in a
//     directory tied to the broker's cluster id, never Goka's temp-dir default.
//   - A group's topics are the ones its state was built from: their topic ids
//     are recorded in the state directory, and a running processor checks ids
//     and partition counts every TopicCheckInterval (one metadata request).
//     A topic deleted, recreated or repartitioned under it stops it with a
//     *TopicChangeError (ErrTopicChanged, ErrPermanent; Ready and
//     fencestream_topic_changes_total say which topic and how) and refuses a
//     restart on that state: the old topic's offsets and envelopes are never
//     applied to the new one until an operator resets the groups.
//   - Every retry loop waits with a jittered, capped exponential Backoff and
//     logs through a LogLimit: a broker or topic that is gone costs neither a
//     core nor the disk.
//
// # Processing guarantee: effectively-once outputs
//
// Input is consumed at least once: after a crash, a restart or a partition
// takeover, every input since the group's last offset commit is delivered
// again. The kit makes that invisible downstream. A key's table value is an
// envelope (processors/group/kitpb) holding the application's state together with, per
// input partition, a cursor: the position (offset; on a stream declared
// OrderedByHLC also the HLC and a digest of the bytes) of the last input
// applied, the earlier inputs that can still be redelivered, and the exact
// records (topic, key, value, headers) those emitted. The state, the cursor
// and the outputs are written in one table write when the handler returns.
// A replay is recognised by its position — its offset is not above the
// cursor's (on an ordered stream: nor its HLC) — or, at a new offset, by its
// exact bytes (the last applied record produced twice); never by the HLC
// alone. The handler is not called: the recorded outputs are produced again,
// byte for byte. So whatever moment a process dies at, an input's effect and
// its outputs stay together, and a consumer that drops duplicate records (by
// the trigger id, say) sees every output exactly once. A new input of an
// ordered stream whose HLC is the last applied one, with other bytes, is
// dead-lettered (duplicate-hlc); one with a lower HLC, stale. A handler that
// leaves the state alone and emits nothing writes nothing; one that emits
// without changing the state of a key that has an envelope records its
// outputs like any other — on an ordered stream in its own write; on a
// stream without order (a hop that only routes, say) with the key's next
// write, the advance kept in memory until then (once.Deferred). A crash loses
// only advances made after the key's last write, on the state that write
// stored: redelivered, those inputs are new to the stored cursor and run
// again on that same state, emitting the same records.
//
// Emit on change (KIP-557): an input on a stream without order (or a visit)
// whose handler sets the state it found, byte for byte (or deletes an absent
// one), emits nothing and changes no timer writes nothing to the table or its
// changelog, not even its cursor's advance (counted in
// fencestream_unchanged_writes_skipped_total). A replay of it is a no-op too,
// so nothing needs to recognise one: redelivered before the key's next write,
// it is new to the stored cursor and runs again on the same state, changing
// nothing again; redelivered after a later input's write moved the cursor
// past it, it is a replay the cursor does not list, which the kit knows had
// no outputs when it is at or above the committed offset (no-outputs) — and
// where commits are unknown it counts as beyond-window, with the same effect:
// nothing applied, nothing emitted. An ordered input always writes: its HLC
// and digest in the cursor are what make a later input with an HLC not above
// it stale (or a duplicate, or a copy), so skipping it would let a later
// input be applied out of order. Like a deferred advance, a skipped input
// does not record the partition's stream time in the key's envelope.
//
// Where it lives: every input takes one record path (record.go: admit,
// dedupe, run, commit, release, in that order, each written once), and what
// the path decides — is this input applied already, what does applying it
// record, what may be forgotten, must it wait for the commit, which advances
// may wait for the key's next write — is the package internal/once, plain
// functions over envelopes that know neither Goka nor this package.
//
// The memory is bounded by what can be redelivered: the processor polls the
// group's committed offsets from the broker (every DefaultCommitPoll), and a
// cursor keeps only the inputs at or above its partition's committed offset,
// with the outputs of those that emitted any; cursors are offset deltas
// (packed varints), and an output keyed like its input is stored without its
// key. An input's outputs are forgotten only once it is below the committed
// offset — Goka commits an input after all its outputs are acknowledged, so
// only then are they known to be in their topics — and it cannot be
// redelivered except by a reset of the group's offsets. A key whose cursor
// holds the outputs of ReplayWindow uncommitted inputs (default
// DefaultReplayWindow; commits stall in a broker outage) does not forget the
// oldest: its next input waits until the commit passes it (record.awaitRoom),
// pausing only that partition — earlier inputs keep being committed — and no
// longer than the partition runs; waits are counted in
// fencestream_replay_window_waits_total. Inputs that emitted nothing do not
// count: beyond the window they are forgotten, and a redelivery of one at or
// above the commit knows it had no outputs.
// A redelivery the cursor no longer remembers — after a reset of the
// offsets — is not applied twice and never dead-lettered, but cannot be
// re-emitted; it is counted
// (fencestream_replayed_inputs_total{result="beyond-window"}) and logged.
// With Goka's tester nothing is committed or redelivered (CommittedOffsets
// can emulate commits): nothing waits and the window alone bounds, dropping
// the oldest; so it does with a broker whose committed offsets are unknown
// (CommittedOffsets answering not ok).
//
// Offsets are committed in input order: an input's offset is committed only
// when it and every earlier input of its partition finished (callback
// returned, every emit and table write acknowledged). Goka marks an input as
// soon as its own emits are acknowledged, so in acknowledgement order, and
// sarama commits the highest mark: an input whose emit failed (a rejected
// record, retries exhausted in an outage) would be committed past by a later
// input acknowledged first, and after the restart its error causes never be
// processed again, its outputs and state change lost. The kit's consumer
// group (ConsumerGroupBuilder, inorder.go) hands Goka a session whose marks
// advance a partition only over the prefix of delivered inputs that all
// finished; an input that never finishes holds back its partition's commit,
// and is redelivered. The bookkeeping is what is in flight, per session.
//
// A group may keep its keys' decoded envelopes in memory (CacheEnvelopes), so
// an input reads its key's envelope without a store read or a decode; a
// cached envelope is always exactly what the partition's store holds (every
// write of the store invalidates it), so the guarantee above is unchanged.
//
// # Record cache
//
// With RecordCache (off by default) a callback's table write goes to a
// bounded per-processor cache of encoded envelopes, and every CommitInterval
// (default DefaultCommitInterval, 50 ms), when the dirty bytes pass the
// budget, when a key waits for the commit (record.awaitRoom) and when a
// session ends, each dirty key's latest value is written once: to the
// changelog by the kit's own producer and, acknowledged, to the partition's
// store with the changelog offset, as Goka's own writes record it. Kafka
// Streams' cache.max.bytes.buffering and commit.interval.ms. Outputs are not
// held back: they are produced from the callback as before, so latency is
// unchanged.
//
// Why the kit writes, not Goka: Goka writes a key's value only from that
// key's own callback, so coalescing through it would take a record per
// flushed key through a topic — the round trip the cache is there to save.
// The kit already owns what a write touches: the stores (its storage builders
// wrap them; the envelope cache and the timer index see the flush's writes
// as they see Goka's) and the commits (the in-order consumer group, whose
// marks a record cache holds back in a markGate).
//
// Why it is still effectively-once: an input's offset is handed to sarama
// only after every table write made before the input was marked is in the
// changelog and the store (a flush takes the held marks first, then writes
// every key dirty at that moment, then hands the marks over). A crash, a
// kill -9 or a lost partition before that drops the dirty values and the
// held marks together, so those inputs are redelivered to a stored envelope
// that never saw them: they are new to it, run again on the state they first
// saw, and emit the same records byte for byte (the argument of
// once.Deferred for routing hops, which keep their advances in memory the
// same way). A consumer that drops duplicates sees them once; no state
// change is applied twice. Goka's tester commits nothing, so RecordCache is
// ignored with Tester.
//
// Visits (Processor.VisitAll) have no input to replay, so time-driven work
// goes through a record: timers. The kit itself runs no visit.
//
// # Time: stream time, timers, windows, state TTL
//
// A stream declared with EventTime moves its partition's stream time: the
// highest event time applied there (an event time ahead of the wall clock
// counts only up to it), and — with IdleStreamTime — the wall clock once the
// partition has been idle that long. It is kept with the state: every
// envelope a write stores records its partition's stream time
// (Envelope.stream_ms), and when a partition has recovered after a start, a
// restart or a takeover, before its first record, its stream time is the
// highest of its envelopes (read by the scan that builds the timer index). So
// a restart changes no verdict on lateness: a record an uninterrupted run
// would call late is late after a restart too. Two limits: a group without
// timers builds no index and starts with its stream time unknown (0) until
// the next record (it has no window, join or TTL to judge); and a record
// that writes nothing (no state change, no output) moves stream time in
// memory only, so if the process stops before any later write of the
// partition and after the record's offset is committed, its event time is
// forgotten (a redelivered record moves stream time again as it is read).
//
// Handlers set per-key timers on stream time or on the wall clock
// (Context.SetTimer); they are stored in the key's envelope, so they survive
// restarts and rebalances, and are bounded per key (MaxTimers). Per partition
// it processes, the processor keeps an index of its keys by earliest due time
// per clock (a min-heap each; about 150 bytes per key with timers), with this
// invariant: it agrees with the timers in the partition's stored envelopes.
// It is built once, from the partition's local store, when the partition has
// recovered after an assignment or a restart, and every commit that changes a
// key's timers (or deletes the key) updates it; hot standbys keep none. The
// processor looks at the index every TimerInterval — no table value is read,
// so a look costs the due keys, not the held ones — and sends a tick for each
// key with a due timer (at most TimerBatch in flight per partition; when half
// of them have been handled and more keys are due, the partition's next batch
// is sent at once rather than at the next look, so a fleet falling due at once
// fires at the speed of its handlers while inputs queue behind only a small
// batch) to the group's own <group>-timers topic (Goka allows one loop per group,
// and the application may need it); the tick records the stream time and wall
// clock it was judged at, and the key's due timers fire in due-time order in
// that record's callback (OnTimer). So a timer's effect and outputs are
// effectively-once like any input's, a replay fires the same timers, and a
// handler stamps what it writes with Timer.At, never the wall clock. A
// partition catching up on a backlog has a stream time that follows the
// backlog, so its stream-time timers fire only once the records before them
// in event time are applied.
//
// Windows (NewWindows) and state TTL (StateTTL) are built on stream-time timers.
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
//   - No record cache. Kafka Streams' caching store (its default) coalesces a
//     window's updates between commits, so what it forwards depends on commit
//     timing; the kit hands over every update, as Kafka Streams does without
//     caching. The last result of each window is the same.
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
//
// # Versioned tables and joins as of a time
//
// A VersionedTable keeps, per key, the versions of a value with their
// validity (Kafka Streams' versioned stores, KIP-889) in a kitpb.VersionSet
// inside the key's state: a version is valid from its put's event time until
// the next version's. Puts may arrive in any order — one older than the
// latest becomes history in its place, one at an existing time replaces it,
// a delete is a tombstone version — and are judged by the later of the
// partition's stream time and the key's: one older than that minus
// VersionSpec.History is dropped, counted and reported (ErrBeyondHistory).
// The latest version is always kept; older ones go once no read within the
// history needs them, and beyond VersionSpec.MaxVersions per key (the
// stated bound) the oldest go early, after which nothing older is answered.
// JoinVersioned and LookupVersioned read another group's versioned table as
// of a time (KIP-914): a stream record at time t joins the version valid at
// t, not the latest (Inner, Left, AsOf); a time older than the history
// answers no value and is counted. The versions are state, so they are
// written with the key's envelope, restored from the changelog, and a
// join's outputs are recorded and replayed like any handler's.
//
// # Building: options, builds, metrics, handles
//
// A Group is a declaration plus registrations (New, Stream, Loop, Output,
// Join, Lookup, OnTimer, windows); Processor builds one processor from it
// and never writes to it, so building a group twice gives two independent
// processors, each with its own options, stream time, timer index and
// metrics. Options follow one recipe (franz-go's kgo), here and in every
// kit package (ViewOpt, StreamOpt, statestore.Opt, httpguard.Opt): an
// exported Opt is a function over an unexported config; one defaults
// function (defaultRunConfig, defaultViewConfig) writes every default; one
// validate checks the options together and refuses a bad one with an error
// naming it (TimerBatch: must be at least 1, got 0); each option's doc names
// the default it overrides.
//
// The package holds no mutable state. Every metric is created per processor
// and registered on its Registerer (default prometheus.DefaultRegisterer);
// processors sharing a registry share its collectors (an already registered
// collector is reused), their series told apart by the group label.
//
// Handles (Out, LoopOut, Joined, Looked) belong to the group whose Output,
// Loop, Join or Lookup returned them, and carry the message type. When the
// group is built, every registration's message type — handlers' inputs,
// outputs, joins, lookups, the table's state — is checked against the
// message the topology declares for the topic (Topic.Value, when it is a
// protobuf full name) and against the other registrations of the topic; a
// mismatch is refused, naming the handle. Handlers hold handles in closures,
// which the kit cannot inspect, so a zero handle, one of another group, or
// one declared after the processor was built is refused at its first use:
// the input is dead-lettered (reason misused-handle) and the processor goes
// on.
//
// Goka's untyped API (any values, goka.Context) stays inside this package;
// handlers see typed messages and a typed Context.
package group
