// Package topology declares what a fencestream deployment is made of — topics
// with their key, value schema, partition count and cleanup policy;
// processors with their inputs, outputs, loop, table, joins and lookups; and
// the ordering boundaries where a flow changes its key — and checks those
// declarations against themselves (Validate) and against a broker (Ensure,
// Check).
//
// Invariants:
//   - Every key→partition decision is (murmur2(utf8 key) & 0x7fffffff) % n,
//     Kafka's Java default, computed here (PartitionFor) and given to Goka as
//     its hasher; nothing falls back to FNV-1a.
//   - A topology that validates has no undeclared re-key: every flow whose
//     output key differs from its input key is a Boundary saying what order
//     survives and what is lost.
//   - A broker whose topics disagree with the declaration (partition count,
//     cleanup policy) is refused with a MismatchError naming the topic, both
//     values and why; partition counts are never changed.
//   - Keys are valid UTF-8, non-empty and at most MaxKeyBytes (ValidateKey).
//   - Processors outside the framework add themselves with Register and an
//     Extension; Compose gives every binary the same composed topology.
package topology
