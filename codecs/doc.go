// Package codecs holds fencestream's protobuf schemas (proto/: the geofencing
// schema, generated into geofencepb; the kit's, generated into
// processors/group/kitpb; the producer's hot-key record, into hotkeypb), and
// one generic Goka codec for any proto message.
//
// Invariant: decoding never fails a processor. Bytes that are not a valid
// message decode to a *Poison carrying the raw bytes and the reason; the
// processor plumbing routes it to the dead-letter topic and carries on.
// Schemas evolve compatibly: field numbers are never reused (reserved), and
// golden bytes of earlier versions stay decodable (compat_test.go).
package codecs
