// Package once is the kit's effectively-once protocol: what a key's table
// value (kitpb.Envelope) remembers of the inputs applied to it, and the
// decisions taken from it — whether an input was applied already (Check),
// what applying one records (Bounds.Record), what can be forgotten
// (Bounds.Trim), when a key must wait for the group's offset commit
// (Bounds.Full), and which advances may wait in memory for the key's next
// write (Deferred). It is plain functions over envelopes and bytes: it knows
// neither Goka nor the kit's public API, so every rule is testable on its own.
//
// Invariant: an input is applied to a key's state at most once, and a
// redelivered input the envelope still remembers produces exactly the
// records it produced the first time. A cursor per input partition holds the
// position (and, on an ordered stream, the HLC and digest) of the last input
// applied, the distances back to the earlier inputs that can still be
// redelivered (those at or above the group's committed offset) and their
// recorded outputs. A redelivery is recognised by its position, or, at a new
// position on an ordered stream, by its exact bytes; never by its HLC alone.
// Against a broker (Bounds.Waits) no input with outputs at or above the
// committed offset is ever forgotten: a key that already holds Window such
// inputs waits for the commit instead (Bounds.Full).
package once
