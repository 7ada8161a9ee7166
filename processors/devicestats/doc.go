// Package devicestats is a processor written only against the public kit, as
// a user of fencestream would write one: it counts each device's pings in a
// group table keyed by device_id (co-partitioned with pings, so no boundary).
// It is one value, Module: its topology extension, its group and a fenceview
// route, so that any binary linking the module (the all-in-one runner,
// fencectl, fenceview, its own main) shows and runs it without a change to the
// framework.
//
// Invariant: the count of a device is the number of its pings applied once
// each; a redelivered ping is not counted again (the kit's envelope).
package devicestats
