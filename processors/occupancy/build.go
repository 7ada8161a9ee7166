package occupancy

import (
	"context"
	"fmt"

	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Processor builds the occupancy processor of g against a broker: g.Processor
// (topology check, state directory, pinned hasher, oldest offsets) plus the
// loop-topic fix below. Use g.Processor directly only with group.Tester.
//
// Goka checks the loop topic as a stream that must have retention.ms equal to
// its topic manager's Stream.Retention (1h by default), and group's topic
// manager fails on any mismatch. topology.Ensure creates occupancy-loop with
// the broker's default retention, so Goka would refuse to start. Partition
// count and cleanup policy of the loop topic are already checked by
// group.CheckBroker against the declaration; here Goka's check of that one
// topic is reduced to its partition count.
func Processor(ctx context.Context, g *Group, cl cluster.Config, opts ...group.Opt) (*group.Processor, error) {
	sc, err := cl.Sarama()
	if err != nil {
		return nil, fmt.Errorf("occupancy: %w", err)
	}
	inner := goka.TopicManagerBuilderWithConfig(sc, group.TopicManagerConfig())
	tmb := func(brokers []string) (goka.TopicManager, error) {
		tm, err := inner(brokers)
		if err != nil {
			return nil, err
		}
		return loopTopicManager{TopicManager: tm, loop: topology.TopicOccupancyLoop}, nil
	}
	opts = append(opts, group.GokaOptions(goka.WithTopicManagerBuilder(tmb)))
	return g.Processor(ctx, cl, opts...)
}

// loopTopicManager checks only the partition count of the loop topic.
type loopTopicManager struct {
	goka.TopicManager
	loop string
}

func (m loopTopicManager) EnsureStreamExists(topic string, npar int) error {
	if topic != m.loop {
		return m.TopicManager.EnsureStreamExists(topic, npar)
	}
	parts, err := m.Partitions(topic)
	if err != nil {
		return fmt.Errorf("loop topic %s: %w", topic, err)
	}
	if len(parts) != npar {
		return fmt.Errorf("loop topic %s has %d partitions but its inputs have %d: a fence would live on different partition numbers", topic, len(parts), npar)
	}
	return nil
}
