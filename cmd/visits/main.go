// Command visits runs the visits processors: ENTER and EXIT triggers paired
// into visit records per device, and hourly visit statistics per fence across
// the declared boundary.
package main

import (
	"context"
	"io"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/processors/visits"
)

func binary() host.Binary {
	return modules.Binary("visits", "Pairs ENTER and EXIT triggers into visits and keeps hourly visit statistics per fence.",
		"127.0.0.1:9103", visits.Module())
}

func main() { host.Main(binary()) }

// run is main without the process (tests).
func run(ctx context.Context, args []string, stderr io.Writer, started func(*group.Processor)) error {
	return binary().Run(ctx, args, stderr, started)
}
