// Command occupancy runs the occupancy processor: triggers keyed by device_id
// in from fence-triggers, re-keyed by fence_id through occupancy-loop (the
// topology's declared ordering boundary), and an exact device count per fence
// in the occupancy-table group table. It exports its lag behind the trigger
// stream as fencestream_occupancy_lag_records{topic,partition}.
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
	return modules.Binary("occupancy", "Counts devices per fence from fence-triggers, re-keyed by fence_id across the declared ordering boundary.",
		"127.0.0.1:9102", occupancy.Module())
}

func main() { host.Main(binary()) }

// run is main without the process (tests): started sees the processor once
// it is ready.
func run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	return binary().Run(ctx, args, stderr, started)
}
