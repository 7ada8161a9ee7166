package group

import (
	"github.com/IBM/sarama"
)

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
