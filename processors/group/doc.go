// Package group builds and runs Goka processor groups from a declared topology:
// the plumbing every fencestream processor (and any user's processor) shares.
//
// Invariants:
//   - Every processor, view and emitter it builds hashes keys with the pinned
//     murmur2 partitioner (topology.NewHasher); none can fall back to FNV-1a.
//   - A group's Goka edges are exactly the topics its topology declaration names;
//     anything else refuses to build.
//   - No input stops a processor: an empty or malformed key, undecodable bytes
//     or a record the handler rejects goes to the dead-letter topic with its
//     original key and value and a reason header, and the next record flows.
//   - Consumer groups start at the oldest offset and local state lives in a
//     directory tied to the broker's cluster id, never Goka's temp-dir default.
//
// Goka's untyped API (any values, goka.Context) stays inside this package;
// handlers see typed messages and a typed Context.
package group
