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

	"github.com/fencestream/fencestream/processors/group/internal/kafka"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

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

// GokaClientOptions are the Goka processor options a group's processor gets
// for its clients, for code that runs a bare Goka processor beside the kit's
// (a benchmark's baseline): every client on its own copy of sc (never Goka's
// global config), the consumer group that commits in input order and does not
// sleep after a rebalance, Goka's topic manager that only checks, and a
// producer that flushes after flush (ProducerFlush's setting; the default is
// DefaultProducerFlush).
func GokaClientOptions(sc *sarama.Config, flush time.Duration) []goka.ProcessorOption {
	return append(kafka.ProcessorOptions(sc), goka.WithProducerBuilder(kafka.ProducerBuilder(kafka.WithProducerFlush(sc, flush))))
}
