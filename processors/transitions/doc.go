// Package transitions keeps, per device, the history of its confirmed
// transitions (ENTER, EXIT, DWELL from fence-triggers) as a versioned table
// (processors/group VersionedTable, Kafka Streams' versioned stores): each
// trigger is a version valid from its event time until the device's next
// one, so "what had car-1 last done at 08:40" is answered as of 08:40, not
// now, whatever order the triggers arrived in. Route: GET
// /v1/devices/{device}/transition?at=RFC3339 (default: the latest).
//
// Invariants: a trigger is applied at its event time; one older than the
// device's stream time minus History is dropped (counted in
// fencestream_versioned_records_total{result="expired"} and dead-lettered,
// reason invalid). Bounds: History of history per device and at most
// MaxVersions versions; the latest is kept whatever its age.
package transitions
