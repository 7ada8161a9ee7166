// Package debounce turns GPS pings into debounced ENTER / EXIT / DWELL triggers.
//
// machine.go is the pure per-(device, fence) state machine, with two rules
// for what a fix is evidence of: sprt.go (sequential evidence, the default)
// and the strict rule (whole accuracy circle); quality/ scores them against
// other detectors (`fencectl quality`, QUALITY.md); apply.go measures a
// ping against the fence catalogue and runs the machines of one device;
// processor.go is the Goka group: input pings keyed by device_id, group table
// keyed by device_id holding DeviceState, output fence-triggers keyed by
// device_id.
//
// Invariants:
//   - A device's state lives only in the instance that owns its partition; the
//     processor is the only writer.
//   - Event time comes from the ping; wall-clock work (the silence sweep) takes an
//     injected clock.
//   - A ping whose HLC does not exceed the device's last applied HLC is not
//     applied (counted and logged).
//   - A trigger's id is derived from device_id (exactly the partition key),
//     fence_id, type and the confirming ping's HLC, so a replay yields the same id.
package debounce
