package geofence_test

import (
	"fmt"

	"github.com/fencestream/fencestream/processors/geofence"
)

// The geofencing topology validates, and declares these topics.
func ExampleTopology() {
	g := geofence.Topology()
	fmt.Println(g.Validate())
	for _, tp := range g.Topics {
		fmt.Printf("%-15s key=%-10s partitions=%-2d %s\n", tp.Name, tp.Key, tp.Partitions, tp.Cleanup)
	}
	// Output:
	// <nil>
	// pings           key=device_id  partitions=24 delete
	// fences          key=fence_id   partitions=1  compact
	// fence-triggers  key=device_id  partitions=24 delete
	// debouncer-table key=device_id  partitions=24 compact
	// debouncer-timers key=device_id  partitions=24 delete
	// occupancy-members-table key=device_id  partitions=24 compact
	// occupancy-changes key=fence_id   partitions=24 delete
	// occupancy-table key=fence_id   partitions=24 compact
	// deadletter      key=original key partitions=24 delete
	// hot-keys        key=topic/key  partitions=1  compact
	// fence-visits    key=device_id  partitions=24 delete
	// visits-table    key=device_id  partitions=24 compact
	// visits-timers   key=device_id  partitions=24 delete
	// visit-rekey-table key=device_id  partitions=24 compact
	// visits-by-fence key=fence_id   partitions=24 delete
	// visit-stats-table key=fence_id   partitions=24 compact
	// visit-stats-timers key=fence_id   partitions=24 delete
}
