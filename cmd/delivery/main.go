// Command delivery runs processors/delivery alone against a broker: it posts
// triggers to the webhooks of the subscriptions topic, signed, in device
// order, with retries that survive restarts.
package main

import (
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
)

func binary() host.Binary {
	return modules.Binary("delivery", "Posts triggers to webhook subscriptions: signed, in device order, retried, dead-lettered.",
		"127.0.0.1:9105", delivery.Module())
}

func main() { host.Main(binary()) }
