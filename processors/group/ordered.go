package group

import (
	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/codecs"
)

// OrderedOutputs makes g's processor keep one produce request in flight per
// broker, so that records it writes to one partition land in the order it
// wrote them even when a request fails and is retried. A consumer that drops
// a record at or below the last position it applied from the same source —
// occupancy's per-partition source offsets — relies on that order.
//
// With the sarama this module pins (1.61) the order holds without it too:
// since 1.48 sarama mutes a partition while a batch for it is in flight,
// whatever Net.MaxOpenRequests. Before 1.48 it held with neither: on sarama
// 1.47 occupancy's TestOccupancyCountsExactUnderProduceRetries (a broker
// that holds requests and fails them with retriable errors) finds retried
// changes behind hundreds of later ones and wrong counts, with this option
// set. It stays as the kit's own statement of what the group needs, and
// costs throughput only when the broker is slow to answer.
func OrderedOutputs[S any, PS codecs.Message[S]](g *Group[S, PS]) { g.orderedOutputs = true }

// outputConfig is pc for the processor's producer, ordered when the group
// asked for it.
func (g *Group[S, PS]) outputConfig(pc *sarama.Config) *sarama.Config {
	if !g.orderedOutputs {
		return pc
	}
	c := *pc
	c.Net.MaxOpenRequests = 1
	return &c
}
