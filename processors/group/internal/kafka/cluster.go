package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/cluster"
)

// ClusterID asks the broker for its cluster id (what a state directory is
// tied to).
func ClusterID(ctx context.Context, cl cluster.Config) (string, error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return "", err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	defer kc.Close()
	meta, err := kadm.NewClient(kc).BrokerMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("broker %s unreachable: %w", strings.Join(cl.Brokers, ","), err)
	}
	return meta.Cluster, nil
}

// TopicPartitions is the partition count of topic on the broker.
func TopicPartitions(ctx context.Context, cl cluster.Config, topic string) (int32, error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return 0, err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, fmt.Errorf("connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	defer kc.Close()
	td, err := kadm.NewClient(kc).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || d.Err != nil {
		return 0, fmt.Errorf("topic %s: not on the broker (%v)", topic, d.Err)
	}
	return int32(len(d.Partitions)), nil
}
