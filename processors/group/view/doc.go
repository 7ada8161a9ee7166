// Package view reads a group's table from outside the group: a typed,
// read-only, local copy of the table (every partition through Goka, or some
// partitions through the kit's own partial view), kept current from the
// table's changelog topic, with its freshness confirmed against the broker.
//
// Invariants:
//   - Keys hash with the pinned murmur2 partitioner (topology), so Get finds
//     keys written by any Java-compatible producer.
//   - Values are read in the group table's format (tablecodec): Get and Each
//     hand over the application's state, never the kit's envelope.
//   - A view with a state directory keeps its copy there, tied to the
//     broker's cluster as a group's state is; reads stop (ErrViewStopped)
//     before the copy is closed, and none is answered before the view has
//     caught up once (ErrNotRecovered).
//   - A partial view answers only keys of the partitions it holds; any other
//     is a *NotHeldError naming the partition, so the caller asks the replica
//     that holds it.
//
// It imports nothing of the kit's root package: a view is the reading side of
// a table and needs none of a group's machinery.
package view
