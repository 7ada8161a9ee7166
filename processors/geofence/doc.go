// Package geofence declares the geofencing application's topology on the
// kit's topology package: its topics (pings, fences, fence-triggers, the
// processors' tables, loops and timers), its processors (debouncer,
// occupancy-members and occupancy, visits, visit-stats) and the ordering
// boundaries where a flow re-keys by fence.
//
// Invariant: Topology validates; every binary of the application starts from
// it (host.Compose adds the declarations of the modules a binary links) and checks the broker
// against it.
package geofence
