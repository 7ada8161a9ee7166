// Package tablecodec is the format of a group table's values: what a group
// writes to its table (and so to the table's changelog topic), and how a view,
// a join, a lookup or any consumer of that topic reads the application's state
// back.
//
// A value is an envelope (processors/group/kitpb.Envelope: the state with the
// effectively-once cursors and timers) after a two-byte magic prefix, encoded
// deterministically. A value without the prefix is bare state written before
// envelopes existed and reads as that state.
//
// Invariant: Decode(Encode(e)) is e, and every value a group ever wrote
// decodes; what cannot be decoded reads as a *codecs.Poison, never as a
// zero state.
//
// It is a public leaf (it imports no other kit package but kitpb) so that
// code outside the kit that reads or seeds a table topic (benchmarks, tests,
// fencectl) need not reach into the kit's internals, and the kit's internal
// packages can share the format without importing the kit's root.
package tablecodec
