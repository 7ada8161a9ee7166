// Package debounce turns GPS pings into debounced ENTER / EXIT / DWELL triggers.
//
// machine.go is the pure per-(device, fence) state machine, with two rules
// for what a fix is evidence of: sprt.go (sequential evidence, the default)
// and the strict rule (whole accuracy circle); quality/ scores them against
// other detectors (`fencectl quality`, BENCHMARKS.md at the repository root); apply.go measures a
// ping against the fence catalogue and runs the machines of one device;
// processor.go is the Goka group: input pings keyed by device_id, group table
// keyed by device_id holding DeviceState, output fence-triggers keyed by
// device_id.
//
// Invariants:
//   - A device's state lives only in the instance that owns its partition; the
//     processor is the only writer.
//   - Event time comes from the ping; wall-clock work takes an injected clock.
//   - A device silent past its silence timeout while INSIDE is closed with an
//     EXIT reason TIMEOUT stamped last fix + timeout, by a kit timer on stream
//     time (SilenceTimer), armed by every applied ping.
//   - A ping whose HLC does not exceed the device's last applied HLC is not
//     applied (counted and logged).
//   - A trigger's id is derived from device_id (exactly the partition key),
//     fence_id, type and the confirming ping's HLC, so a replay yields the same id.
//   - A fence with groups is measured only for a device whose ping names one
//     of them (Ping.groups, set by the producer); a ping that names none ends
//     the device's state there, with an EXIT reason GROUP_LEFT if it was
//     inside. A fence without groups costs one length test more per lookup.
//   - A trigger carries the fence's name and tags (from the catalogue entry,
//     shared, not copied) and the device's groups (from the ping; for a
//     TIMEOUT exit, from the last ping, kept in DeviceState.groups).
//
// # Crossings
//
// With Settings.Crossing on (the debouncer's default, or a fence's crossing
// setting), crossing.go emits a CROSS when the straight segment between two
// consecutive fixes, both outside and with no live state for the fence, runs
// through it farther than the two fixes' σ together and, at the middle of
// its longest inside stretch, deeper than twice the σ of a position
// interpolated there. Its event time is interpolated between the fixes'
// device times to that middle; its HLC and id are the second fix's. It only
// reads the state's last position, time and (while crossings are on
// anywhere) last accuracy, and changes no fence's machine. Fences without
// the setting cost nothing: with none in the catalogue and the default off,
// no search is made and last_accuracy_m is not written.
//
// # Why the silence timer runs on stream time
//
// A device is silent when the pings of its partition have moved on without
// it, not when the wall clock has. On stream time (the highest event time the
// instance has applied on the partition) a partition catching up on a backlog
// reaches a device's last fix + timeout only after it has applied every ping
// queued before that moment, the device's own included: a ping that was merely
// late in the backlog re-arms the timer before it is due, so no device is
// timed out by the backlog (the wall-clock sweep needed a hand-made watermark
// hold-back for this). The one case stream time cannot see is a partition
// whose pings all stop: with the processor option IdleStreamTime (set by
// ProcessorOpts to the silence timeout) such a partition's stream time follows
// the wall clock, as the sweep did. Either way the TIMEOUT exit is stamped
// with the timer's due time, so a replay writes the same trigger.
package debounce
