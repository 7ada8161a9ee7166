// Command transitions runs processors/transitions alone against a broker:
// each device's confirmed transitions as a versioned table, answered as of a
// time.
package main

import (
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/processors/transitions"
)

func binary() host.Binary {
	return modules.Binary("transitions", "Keeps each device's confirmed transitions as a versioned table, answered as of a time.",
		"127.0.0.1:9106", transitions.Module())
}

func main() { host.Main(binary()) }
