// Command debouncer runs the debouncer processor: pings keyed by device_id in
// from device-pings, each device's debounce state in the debouncer-table group
// table, and debounced ENTER / EXIT / DWELL triggers out to fence-triggers.
package main

import (
	"context"
	"io"

	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
)

func binary() host.Binary {
	return modules.Binary("debouncer", "Debounces pings into ENTER, EXIT and DWELL triggers per device and fence.",
		"127.0.0.1:9101", debounce.Module())
}

func main() { host.Main(binary()) }

// run is main without the process (tests).
func run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	return binary().Run(ctx, args, stderr, started)
}
