// Command devicestats runs the guide's worked example, processors/devicestats, alone against a broker.
package main

import (
	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
)

func binary() host.Binary {
	return modules.Binary("devicestats", "Counts pings per device and hour, and active devices per hour.", "127.0.0.1:9104", devicestats.Module())
}

func main() { host.Main(binary()) }
