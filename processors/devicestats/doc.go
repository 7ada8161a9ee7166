// Package devicestats is the guide's worked example (processors/README.md): a
// processor of two groups on the public kit, hosted as one Module. Group
// devicestats (keyed by device_id, like pings) counts each device's pings in
// hourly tumbling windows on event time and emits each closed hour to
// device-hours; group fleetstats re-keys those by hour through its loop (the
// declared boundary) and counts each hour's devices and pings.
//
// Invariants: a device's hour holds its pings that arrived before stream time
// passed the hour's end plus HourGrace; a later one is counted as late, in no
// hour. A fleet hour counts a device once however often its summary arrives.
// Bounds: HoursKept closed hours per device, which expires after DeviceTTL
// without pings; MaxDevicesPerHour ids per fleet hour, which expires FleetTTL
// after its end.
package devicestats
