package group

import (
	"time"

	"github.com/IBM/sarama"
)

// DefaultProducerFlush is how long the processor's producer holds records to
// batch them (Goka's default is 100 ms or 64 KB, whichever first; a trigger's
// latency pays it at every hop). Chosen by measurement with fencectl bench,
// see BENCHMARKS.md.
const DefaultProducerFlush = time.Millisecond

// producerConfig is sc with the processor's producer flush setting.
func (c *config) producerConfig(sc *sarama.Config) *sarama.Config {
	return WithProducerFlush(sc, c.flush)
}

// WithProducerFlush is a copy of sc whose producer sends a batch d after its
// first record, or at 64 KB (Goka's size trigger). With d = 0 there is no
// size trigger either, so sarama sends as soon as it can: sarama flushes by
// time only when Frequency is set, so a size trigger alone would hold a
// quiet partition's records until 64 KB arrive.
func WithProducerFlush(sc *sarama.Config, d time.Duration) *sarama.Config {
	pc := *sc
	pc.Producer.Flush.Frequency = d
	if d <= 0 {
		pc.Producer.Flush.Frequency, pc.Producer.Flush.Bytes, pc.Producer.Flush.Messages = 0, 0, 0
	}
	return &pc
}
