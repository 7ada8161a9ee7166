// Package dueindex is the kit's due-time index of timers: per partition this
// instance processes, every key with timers and the earliest due time of its
// stream-clock and of its wall-clock timers, in one min-heap per clock. A look reads the heaps' tops, so it
// costs the timers that are due, not the keys that are held.
//
// Invariant: for a partition whose index is installed, the index holds, per
// key, the earliest due time per clock of the timers in the key's stored
// envelope. It is built once, when the partition's table has recovered (a
// scan of the partition's local store), and kept by every write of the
// partition's envelopes that changes its timers (Context.commit); nothing
// else writes a processing partition's table. A partition that is not
// installed (recovering, a hot standby) is not looked at.
//
// It is storage-level: it reads the group table's stores (the format of
// tablecodec) and knows nothing of groups, handlers or Goka processors; the
// kit's timer driver looks at it and the record path keeps it.
package dueindex
