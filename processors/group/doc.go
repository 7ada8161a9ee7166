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
//     most deadletter.CutKeyBytes and deadletter.CutValueBytes, the source and reason headers, and
//     deadletter.HeaderCutDown with the sizes (deadletter.HeaderKeyBytes, deadletter.HeaderValueBytes); one the
//     broker refuses for its size anyway is sent again cut down, once.
//   - No log line carries an unbounded key or value: the kit logs through
//     boundedlog.New (each attribute at most boundedlog.ValueLimit bytes) and shows
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
//   - Every retry loop waits with a jittered, capped exponential
//     retry.Backoff and logs through a retry.LogLimit: a broker or topic that
//     is gone costs neither a core nor the disk.
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
// group (internal/kafka: consumergroup.go, inorder.go) hands Goka a session
// whose marks advance a partition only over the prefix of delivered inputs
// that all finished; an input that never finishes holds back its
// partition's commit, and is redelivered. The bookkeeping is what is in flight, per session.
//
// A group may keep its keys' decoded envelopes in memory (CacheEnvelopes), so
// an input reads its key's envelope without a store read or a decode; a
// cached envelope is always exactly what the partition's store holds (every
// write of the store invalidates it), so the guarantee above is unchanged.
//
// # Record cache
//
// With the record cache (on by default: RecordCache, DefaultRecordCache =
// 16 MiB per processor; RecordCache(0) turns it off) a callback's table
// write goes to a bounded per-processor cache of encoded envelopes, and
// every CommitInterval (default DefaultCommitInterval, 50 ms), when the
// dirty bytes pass the budget, when a key waits for the commit
// (record.awaitRoom) and when a session ends, each dirty key's latest value is written once: to the
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
// ignored with Tester: every write there reaches the table at once.
//
// What readers see: the changelog (and so a view or a Lookup of the table)
// and the store lag a callback's write by up to CommitInterval and the
// flush's own time while the cluster answers: the flusher runs on a ticker,
// loaded or idle. A flush that fails (the cluster away) keeps its values
// dirty and its marks held, and the next one starts a new producer. The cache reports
// fencestream_record_cache_{hits,misses,evictions,flushed_keys}_total and
// fencestream_record_cache_flush_seconds per group.
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
// State TTL (StateTTL) is built on stream-time timers of the kit's own, and
// so are windows, sessions, sliding windows and stream joins
// (processors/group/windows), through an Operator: a timer per key the
// group's OnTimer handler never sees. Versioned tables
// (processors/group/versioned) are state alone.
//
// # Building: options, builds, metrics, handles
//
// A Group is a declaration plus registrations (New, Stream, Loop, Output,
// Join, Lookup, OnTimer, operators); Processor builds one processor from it
// and never writes to it, so building a group twice gives two independent
// processors, each with its own options, stream time, timer index and
// metrics. Options follow one recipe (franz-go's kgo), here and in every
// kit package (view.Opt, StreamOpt, statestore.Opt, httpguard.Opt): an
// exported Opt is a function over an unexported config named by a bare noun
// (no With prefix); one defaults function (defaultConfig, view.defaultConfig)
// writes every default; one validate checks the options together and refuses
// a bad one with an error naming it (TimerBatch: must be at least 1, got 0);
// each option's doc names the default it overrides. No free function mutates
// a group under construction. One Opt type serves both places a group takes
// options: New takes what the group is, which its application writes
// (CacheEnvelopes, CacheStates, StateTTL, OrderedOutputs, OnDeadLetter);
// Processor and Run take how this process runs it, which a main sets from
// its flags (StateDir, Tester, Now, ReplayWindow, ...). An option given at
// the other place is refused when the group is built, naming it and where it
// belongs ("StateTTL: an option of New, given to Processor or Run"). A name
// has one meaning across the kit and the application: Now is a wall clock
// (func() time.Time), HLC a hybrid logical clock (produce.HLC).
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
// Goka's untyped API (any values, goka.Context) stays inside the kit;
// handlers see typed messages and a typed Context.
//
// # Layers
//
// This package is the Processor API: a group, its typed handles, Context,
// timers, options, running it. Beside it, public: view (a group's table read
// from outside the group), tablecodec (the table's value format, for
// anything that reads or seeds a table topic: benchmarks, tests, tools), and
// leaves any package may import without this one: retry (Backoff, LogLimit),
// collector (metric registration on the Registerer given), boundedlog
// (bounded log lines). Behind Go's internal wall, never imported from
// outside the kit and never importing this package: internal/kafka (Goka's
// and sarama's clients, the in-order consumer group), internal/statedir (a
// state directory's cluster marker), internal/dueindex (the timers' due-time
// index). CheckBroker, CheckStateDir and GokaClientOptions stay here because
// binaries and benchmarks call them with the kit's topology and settings.
package group
