package kafka

import (
	"hash"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// Goka's *WithConfig builders write ClientID (and the producer's Partitioner)
// into the config they were given, which every client already built from it
// reads while it runs: a data race each time the kit restarts a Goka
// processor beside live clients (found by -race in
// TestFailedInputIsNotCommittedPast). The builders here give each client its
// own copy of the config.

// ownConfig is a copy of sc for one client to keep.
func ownConfig(sc *sarama.Config) *sarama.Config {
	c := *sc
	return &c
}

// ProducerBuilder is goka.ProducerBuilderWithConfig on a copy of sc per
// producer.
func ProducerBuilder(sc *sarama.Config) goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		return goka.ProducerBuilderWithConfig(ownConfig(sc))(brokers, clientID, hasher)
	}
}

// SaramaConsumerBuilder is goka.SaramaConsumerBuilderWithConfig on a copy of
// sc per consumer.
func SaramaConsumerBuilder(sc *sarama.Config) goka.SaramaConsumerBuilder {
	return func(brokers []string, clientID string) (sarama.Consumer, error) {
		return goka.SaramaConsumerBuilderWithConfig(ownConfig(sc))(brokers, clientID)
	}
}
