package group

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// SaramaOptions are the Goka processor options that make every client of the
// processor use sc (oldest offset, TLS, SASL), never Goka's global config.
func SaramaOptions(sc *sarama.Config) []goka.ProcessorOption {
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
// were checked against the declarations by CheckBroker; Goka's own checks of
// retention (1 h) and replication factor (2) would refuse any cluster whose
// defaults differ, e.g. a loop topic created with the broker's retention.
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

// CheckBroker compares the broker with the topology (creating missing topics when
// create is set) and returns the broker's cluster id. A mismatch is an error
// naming the topic, both settings, and why the binary refuses to start.
func CheckBroker(ctx context.Context, cl cluster.Config, topo *topology.Topology, create bool) (string, error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return "", err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	meta, err := adm.BrokerMetadata(cctx)
	if err != nil {
		// Clients report a refused password or certificate as "EOF" or a
		// timeout: say which step fails (cluster.Permanent tells whether
		// waiting can help).
		if derr := cluster.Diagnose(ctx, cl); cluster.Permanent(derr) {
			return "", derr
		}
		return "", fmt.Errorf("broker %s unreachable: %w", strings.Join(cl.Brokers, ","), err)
	}
	if create {
		err = topo.Ensure(cctx, adm)
	} else {
		err = topo.Check(cctx, adm)
	}
	if err != nil {
		return "", err
	}
	return meta.Cluster, nil
}
