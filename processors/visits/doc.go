// Package visits is the larger example of a processor: a stream DSL app
// (processors/group/streams) whose two stateful parts are Process handlers
// on the kit (state, dedup, windows): it pairs each device's ENTER and EXIT
// per fence into visit records, and keeps per-fence hourly ENTER counts and
// mean dwell in windows on event time.
//
// Three groups, because a Goka group has one table and its keys are one kind:
//
//   - visits (key device_id, a Process): reads fence-triggers; keeps the
//     open visits of each device; on an EXIT forwards a Visit (device, fence,
//     entered, left, duration, exit reason) to fence-visits, keyed by device.
//     A trigger id seen in the last hour is a replay and is ignored; an EXIT
//     whose ENTER the state does not hold (the group started after it, or the
//     device's state expired) is counted in
//     fencestream_visits_unpaired_exits_total and emits nothing. A device
//     untouched for 7 days of stream time is forgotten (state TTL), which
//     bounds the table.
//   - visit-rekey (the app's routing group): re-keys ENTERs from
//     fence-triggers (as open visits) and visits from fence-visits by fence
//     into visits-by-fence, across the declared ordering boundaries; a
//     malformed one is dead-lettered as invalid.
//   - visit-stats (key fence_id, a Process): reads visits-by-fence into two
//     tumbling one-hour windows per fence: ENTER count by the ENTER's event
//     time, and completed visits with their dwell by the EXIT's. Windows take
//     records for 10 minutes of stream time after they end, then a
//     stream-time timer closes them; a record for a closed window is late:
//     counted (fencestream_window_late_records_total and the window set's
//     late count) and dropped. Closed windows are kept for 24 hours, so the
//     last day is served (fenceview /v1/fences/{id}/visits). Records are
//     deduplicated by id within an hour (at most 1024 per fence).
//
// Every timestamp written comes from the triggers' event time, so a replay
// writes the same visits with the same ids.
package visits
