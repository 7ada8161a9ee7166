// Package geofence declares the geofencing application's topology on the
// kit's topology package: its topics (pings, fences, fence-triggers, the
// processors' tables, loops and timers), its processors (debouncer,
// occupancy-members and occupancy, visits, visit-rekey, visit-stats) and the ordering
// boundaries where a flow re-keys by fence. It is the application's contract,
// the vocabulary its processors share without importing each other (they talk
// only through topics): the topic names and TriggerID, the id the debouncer
// writes and occupancy checks.
//
// Invariant: Topology validates; every binary of the application starts from
// it (host.Compose adds the declarations of the modules a binary links) and checks the broker
// against it.
package geofence
