// Package versioned is the kit's versioned tables: a group keeps, per key,
// the versions of a value with their validity, and other groups read them as
// of a time.
//
// Invariants:
//   - A key's versions are a kitpb.VersionSet inside its state, written with
//     the key's envelope (effectively once), restored from the group table's
//     changelog, and read by other groups through a Goka join or lookup.
//   - A read never answers a wrong version: a time older than the history
//     kept (retention, or the oldest version the bound on versions per key
//     left) answers Beyond, never an older or newer value.
//   - Versions per key are bounded (Spec.MaxVersions, at most
//     MaxVersionsPerKey).
//
// # Versioned tables and joins as of a time
//
// A Table keeps, per key, the versions of a value with their
// validity (Kafka Streams' versioned stores, KIP-889) in a kitpb.VersionSet
// inside the key's state: a version is valid from its put's event time until
// the next version's. Puts may arrive in any order — one older than the
// latest becomes history in its place, one at an existing time replaces it,
// a delete is a tombstone version — and are judged by the later of the
// partition's stream time and the key's: one older than that minus
// Spec.History is dropped, counted and reported (ErrBeyondHistory).
// The latest version is always kept; older ones go once no read within the
// history needs them, and beyond Spec.MaxVersions per key (the
// stated bound) the oldest go early, after which nothing older is answered.
// Join and Lookup read another group's versioned table as
// of a time (KIP-914): a stream record at time t joins the version valid at
// t, not the latest (Inner, Left, AsOf); a time older than the history
// answers no value and is counted. The versions are state, so they are
// written with the key's envelope, restored from the changelog, and a
// join's outputs are recorded and replayed like any handler's.
package versioned
