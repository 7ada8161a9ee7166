package group

import (
	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/codecs"
)

// OrderedOutputs makes g's processor keep one produce request in flight per
// broker, so that records it writes to one partition land in the order it
// wrote them even when a request fails and is retried (sarama's default of
// five in flight may land a retried batch after a later one). A consumer
// that drops a record at or below the last position it applied from the
// same source — occupancy's per-partition source offsets — relies on it.
// It costs throughput only when the broker is slow to answer.
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
