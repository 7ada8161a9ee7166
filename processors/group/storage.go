package group

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/processors/group/internal/kafka"
)

// DefaultProducerFlush is how long the processor's producer holds records to
// batch them (Goka's default is 100 ms or 64 KB, whichever first; a trigger's
// latency pays it at every hop). Chosen by measurement with fencectl bench,
// see BENCHMARKS.md.
const DefaultProducerFlush = time.Millisecond

// producerConfig is sc with the processor's producer flush setting.
func (c *config) producerConfig(sc *sarama.Config) *sarama.Config {
	return kafka.WithProducerFlush(sc, c.flush)
}
