// Package transitions keeps each device's confirmed transitions as a
// versioned table and joins pings with it as of their time: a processor of
// two groups on the public kit (processors/group/versioned Table and
// Join: Kafka Streams' versioned stores and the stream-table join
// on them, KIP-889 and KIP-914).
//
//   - transitions (key device_id) reads fence-triggers: each trigger (ENTER,
//     EXIT, DWELL) is a version of the device's value, valid from its event
//     time until the device's next trigger, whatever order they arrived in.
//     Route: GET /v1/devices/{device}/transition?at=RFC3339 (default: the
//     latest) answers the device's last transition as of that time.
//   - transitions-pings (key device_id, co-partitioned with the table) reads
//     pings and joins each with the device's transitions as of the ping's
//     device time: inside a fence (last transition ENTER or DWELL), outside
//     (EXIT, or none yet), or unknown (older than the history). A ping that
//     arrives after the device moved on counts where it was when sent.
//     Route: GET /v1/devices/{device}/presence.
//
// Invariants: a trigger is applied at its event time; one older than the
// device's stream time minus History is dropped (counted in
// fencestream_versioned_records_total{result="expired"} and dead-lettered,
// reason invalid). As in Kafka Streams, a join reads the table as this
// instance has read it when the ping is processed: a trigger written after
// that is not seen by the ping. Bounds: History of history per device and
// at most MaxVersions versions, the latest kept whatever its age; a device's
// ping counts expire History after its last ping (state TTL).
package transitions
