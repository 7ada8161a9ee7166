// Package modules is the one place that says which processors the stock
// binaries link: the all-in-one (cmd/fencestream), fenceview (their routes
// and declarations), fencectl (their declarations) and each processor's own
// main (its module, on the same base topology). Add a module of yours to All
// and every stock binary shows and runs it; or write a main of your own that
// names its modules (see processors/README.md).
//
// Invariant: All builds new module values on each call (their flags and
// shared fence catalogue are per binary); nothing here is global.
package modules

import (
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/processors/visits"
	"github.com/fencestream/fencestream/topology"
)

// All is every module the stock binaries link, the debouncer and occupancy
// sharing cat's fence catalogue (nil: each follows its own).
func All(cat *fences.Shared) []host.Module {
	return []host.Module{
		debounce.Module(debounce.Fences(cat)),
		occupancy.Module(occupancy.Fences(cat)),
		visits.Module(),
		devicestats.Module(),
		delivery.Module(),
	}
}

// Base is the geofencing topology at a partition count: what every module
// extends.
func Base(partitions int32) *topology.Topology {
	return geofence.Topology(geofence.Partitions(partitions))
}

// Topology is Base extended by every module of All.
func Topology(partitions int32) (*topology.Topology, error) {
	return host.Compose(Base(partitions), All(nil)...)
}

// Binary is a processor binary of the given name running mods on Base.
func Binary(name, usage, metricsAddr string, mods ...host.Module) host.Binary {
	return host.Binary{Name: name, Usage: usage, MetricsAddr: metricsAddr, Base: Base, Modules: mods}
}
