// Package statestore provides the local storage behind Goka group tables
// (implementations of github.com/lovoo/goka/storage.Storage) and the choice
// between them: Pebble (the default), LevelDB with deferred offset writes, an
// in-memory store rebuilt from the changelog, and, for comparison, Goka's own
// LevelDB storage and a shared Redis server. BENCHMARKS.md at the repository
// root has the measurements that chose the default.
//
// # What the local store is
//
// A group table's truth is its changelog topic. The local store is a cache of
// it: the latest value of every key plus an offset saying how much of the
// changelog the values already contain. On start, Goka replays the changelog
// from that offset to its end. Changelog records carry full values, never
// deltas, so replaying a record whose effect is already stored rewrites the
// value it wrote before, and replaying a range in order ends with every key at
// its newest changelog value. Replaying from an offset that is too old is
// therefore only slower, never wrong; an offset that is too new would skip
// values the store does not have. The one invariant every store here keeps is:
//
//	the stored offset never covers a value the store does not hold.
//
// # Deferred offset writes
//
// Goka's LevelDB storage writes the offset after every message, as its own
// journalled write: a third of a debouncer's storage work. The stores here keep
// the offset in memory and write it at most once per OffsetInterval (default
// 1 s), when recovery completes, and on Close. That is safe by the invariant:
// Goka calls SetOffset(o) only after the value of record o (and, in order, of
// every record before it) was written to the store (during recovery: after
// applying the record; while processing: from the producer's acknowledgement
// of the changelog record, which is emitted after the local write). A deferred
// write stores an offset that was true when it was taken, and later values only
// make the store newer than its offset: a crash replays a few more records.
//
// # Crash safety (kill -9)
//
// Values and the offset live in one database whose log is append-only and
// replayed in order on open (LevelDB's journal, Pebble's WAL, both on). A
// write returns once it is in the log, before any fsync: after a process kill
// the operating system still has it; after a machine crash the log's tail may
// be lost, but a log loses a suffix, never a middle, so an offset that
// survives survives with every value written before it. No write is synced:
// whatever is lost is in the changelog and is replayed.
//
// Like Goka's own storage, a value can be in the store before its changelog
// record is acknowledged, and stay there if the process dies before the ack.
// The input that produced it was not committed (Goka commits an input only
// after all its outputs are acknowledged), so it is processed again on restart
// against that state; the group kit's replay handling covers that case, and it
// is the same for every store here.
//
// # Damage and full disks
//
// A table that cannot be opened (corrupt or missing files, an unknown
// version), or whose reads report corruption, is moved aside to
// <table>.damaged-<time> at its next open and opened empty, so Goka rebuilds
// it from the changelog (OnDamaged reports it). Storage never panics:
// Pebble's corruption reports and fatal logger become errors wrapping
// ErrDamaged.
//
// A Pebble or LevelDB builder watches its directory while any of its tables is
// open: every 100 ms it compares the file system's free space (statfs) with
// what the open tables' next flushes need (the bytes written since their last
// flush; Pebble only) plus 64 KB per table plus MinFreeSpace (default 4 MB),
// and checks that each table directory is writable (access(2)); every second
// it writes and fsyncs a 4 KB probe file (creating an empty file succeeds on a
// full tmpfs). Writes check access(2) every 32 KB too. A table is also checked
// before it opens, with the size of the log its open replays. The first
// failure fails every table of the builder with ErrUnwritable, naming the
// directory, what is free and what is needed, and the fix (OnUnwritable
// reports it): readiness is false and the process stops before Pebble meets a
// full disk. A MANIFEST write the disk refuses (Pebble's Fatalf) marks the
// table and parks the goroutine instead of panicking. Pebble panics with its
// mutex released when its log fails at a rotation (a Go runtime fatal, or a
// mutex left held that Close waits on forever), so a table's log writes that
// the disk refuses anyway (a disk filled faster than the watch looks) mark the
// table unwritable and are dropped from then on: the log on disk loses a
// suffix, never a middle, or ends torn and the table is rebuilt. Close gives
// up on a Pebble that does not close within 5 s.
//
// Disk per table: Pebble's logs are not preallocated (Pebble reserves 1.1
// memtables, 4.4 MB, per log) and not recycled (it keeps up to three old logs
// for reuse), and the MANIFEST is rewritten past 1 MB. A table holds its data,
// the log of what was written since its last flush (at most two memtables: 8
// MB by default) and a MANIFEST of at most about 1 MB. The watch flushes a
// table that holds unflushed writes and had none for 30 s, so an idle table
// holds its data, an empty log and its MANIFEST: 16 KB for a debouncer
// partition of a few devices (measured: 24 partitions, 60 devices, 392 KB in
// all; 185 MB with Pebble's defaults).
//
// # Redis
//
// Redis (with RedisServer) is not a local store: it keeps each table in a
// hash on a shared redis-server, one network round trip per Get, Has, Set
// and Delete, the offset deferred as above. It exists to measure what local
// state is worth (fencectl bench redis runs the same debouncer on both). The
// invariant holds the same way: a Set returns once the server applied it,
// and the deferred offset is written after. What survives is what the
// server keeps (the bench runs it without persistence).
//
// The in-memory store loses everything with the process and is rebuilt from
// the changelog on start (it keeps its tables across rebalances within one
// process, so a partition that stays or comes back only catches up).
package statestore
