package kafka

import (
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// ProcessorOptions are the Goka processor options that make every client of
// the processor use sc (oldest offset, TLS, SASL), never Goka's global config.
func ProcessorOptions(sc *sarama.Config) []goka.ProcessorOption {
	return []goka.ProcessorOption{
		goka.WithConsumerGroupBuilder(ConsumerGroupBuilder(sc)), // no 5 s sleep per rebalance
		goka.WithConsumerSaramaBuilder(SaramaConsumerBuilder(sc)),
		goka.WithProducerBuilder(ProducerBuilder(sc)),
		goka.WithTopicManagerBuilder(TopicManagerBuilder(sc)),
	}
}

// TopicManagerConfig makes Goka's topic manager fail on mismatches and never
// create topics: topology.Ensure owns creation with the declared settings.
func TopicManagerConfig() *goka.TopicManagerConfig {
	tmc := goka.NewTopicManagerConfig()
	tmc.MismatchBehavior = goka.TMConfigMismatchBehaviorFail
	tmc.NoCreate = true
	return tmc
}

// TopicManagerBuilder builds Goka's topic manager with sc, reduced to what the
// topology does not already own: topics must exist (never created by Goka) and
// have the partition count Goka expects. Cleanup policy and partition counts
// were checked against the declarations by the kit's CheckBroker; Goka's own
// checks of retention (1 h) and replication factor (2) would refuse any
// cluster whose defaults differ, e.g. a loop topic created with the broker's
// retention.
func TopicManagerBuilder(sc *sarama.Config) goka.TopicManagerBuilder {
	inner := goka.TopicManagerBuilderWithConfig(sc, TopicManagerConfig())
	return func(brokers []string) (goka.TopicManager, error) {
		tm, err := inner(brokers)
		if err != nil {
			return nil, err
		}
		return partitionsOnly{tm}, nil
	}
}

type partitionsOnly struct{ goka.TopicManager }

func (m partitionsOnly) check(topic string, npar int) error {
	parts, err := m.Partitions(topic)
	if err != nil {
		return fmt.Errorf("topic %s: %w (run topology Ensure / fencectl topology check --create)", topic, err)
	}
	if len(parts) != npar {
		return fmt.Errorf("topic %s has %d partitions but the group's other topics have %d: keys would live on different partition numbers", topic, len(parts), npar)
	}
	return nil
}

func (m partitionsOnly) EnsureStreamExists(topic string, npar int) error { return m.check(topic, npar) }
func (m partitionsOnly) EnsureTableExists(topic string, npar int) error  { return m.check(topic, npar) }
func (m partitionsOnly) EnsureTopicExists(topic string, npar, _ int, _ map[string]string) error {
	return m.check(topic, npar)
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
