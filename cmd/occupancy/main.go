// Command occupancy runs occupancy's two processors: occupancy-members reads
// triggers keyed by device_id from fence-triggers, applies each to the
// device's member register per fence (occupancy-members-table) and sends a
// flip as a count change keyed by fence_id to occupancy-changes (the
// topology's declared ordering boundary); occupancy adds the changes up into
// an exact device count per fence in the occupancy-table group table. It
// exports both groups' lag as fencestream_occupancy_lag_records{topic,partition}.
package main

import (
	"context"
	"io"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/processors/occupancy"
)

func binary() host.Binary {
	return modules.Binary("occupancy", "Counts devices per fence from fence-triggers: member registers per device, count changes re-keyed by fence_id across the declared ordering boundary.",
		"127.0.0.1:9102", occupancy.Module())
}

func main() { host.Main(binary()) }

// run is main without the process (tests): started sees each of the two
// processors once both are ready.
func run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	return binary().Run(ctx, args, stderr, started)
}
