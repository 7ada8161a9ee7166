package group

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/processors/statestore"
)

// Storage chooses the local store of the group table (default
// statestore.Default; BENCHMARKS.md has the measurements behind it).
func Storage(kind statestore.Kind) Opt { return func(c *runConfig) { c.storage = kind } }

// DefaultProducerFlush is how long the processor's producer holds records to
// batch them (Goka's default is 100 ms or 64 KB, whichever first; a trigger's
// latency pays it at every hop). Chosen by measurement with fencectl bench,
// see BENCHMARKS.md.
const DefaultProducerFlush = 5 * time.Millisecond

// ProducerFlush sets how long the processor's producer batches records before
// sending (default DefaultProducerFlush; 0 sends as soon as possible).
func ProducerFlush(d time.Duration) Opt {
	return func(c *runConfig) { c.flush = d; c.flushSet = true }
}

// producerConfig is sc with the processor's producer flush setting.
func (c *runConfig) producerConfig(sc *sarama.Config) *sarama.Config {
	pc := *sc
	pc.Producer.Flush.Frequency = DefaultProducerFlush
	if c.flushSet {
		pc.Producer.Flush.Frequency = c.flush
	}
	return &pc
}

func (c *runConfig) storageKind() statestore.Kind {
	if c.storage == "" {
		return statestore.Default
	}
	return c.storage
}
