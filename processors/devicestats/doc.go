// Package devicestats is the guide's worked example (processors/README.md):
// a two-group processor written only against the public kit, hosted as one
// Module. The devicestats group, keyed by device_id like the pings it reads,
// counts each device's pings in hourly tumbling windows on event time; when
// a device's hour closes (its partition's stream time passes the hour's end
// plus grace, by a record or by the windows' stream-time timer) it emits the
// hour's summary to device-hours. The fleetstats group re-keys those
// summaries by hour through its loop (the declared boundary) and counts the
// active devices and pings of each hour. Routes: GET /v1/devicestats/{device}
// and GET /v1/fleetstats/{hour} (hour as "2026-12-01T15", UTC).
//
// Invariants: a device's hour holds exactly the pings whose event time falls
// in it and that arrived before stream time passed its end plus HourGrace; a
// later one is counted as late (the window set's late count) and in no hour.
// Each closed hour is summarised once per device (the kit's timers and
// envelope are effectively-once), and a fleet hour counts a device once
// however often its summary arrives (dedup by device id): duplicates are
// counted, not added.
//
// Bounds (rule 15): a device keeps its open hours plus HoursKept of closed
// ones, and its whole state expires after DeviceTTL of stream time without
// pings; a fleet hour keeps at most MaxDevicesPerHour device ids (beyond it
// the oldest ids are forgotten, so a duplicate of one of them would count
// again) and expires FleetTTL of stream time after its end.
package devicestats
