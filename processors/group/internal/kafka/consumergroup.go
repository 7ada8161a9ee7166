package kafka

import (
	"context"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/processors/group/retry"
)

// ConsumerGroupBuilder builds sarama consumer groups whose Consume keeps
// running sessions until its context ends or a session fails.
//
// Why: Goka's Processor.rebalanceLoop sleeps 5 s every time Consume returns,
// and sarama's Consume returns at every rebalance, so every partition takeover
// paid a 5 s floor. Looping inside Consume keeps Goka's loop from ever seeing a
// rebalance. Nothing else changes: sarama still calls the handler's Setup and
// Cleanup once per session (generation), so Goka stops every partition
// processor in Cleanup and builds the new assignment (and hot standbys) in
// Setup exactly as before; the rebalance callback runs in Setup. An error from
// a session (a failed Setup, a Cleanup that reports a partition processor's
// processing error, a closed group) is returned at once, as before, and Goka
// stops the processor with it. When ctx ends, Consume returns nil, which Goka
// treats as a clean stop. Goka's error-channel reader spans all the sessions
// of one Consume call; it only logs and cancels a context Consume does not use.
//
// Each session's marks go through inOrder, so an offset is committed only
// once every earlier input of its partition finished (see inorder.go).
func ConsumerGroupBuilder(sc *sarama.Config) goka.ConsumerGroupBuilder {
	return GatedConsumerGroupBuilder(sc, nil)
}

// MarkGate holds a session's in-order marks until what they cover is stored
// (the kit's record cache): Hold takes a mark instead of the session, Flush
// stores what is pending before a session's Cleanup, End forgets an ended
// session's marks (those inputs are redelivered).
type MarkGate interface {
	Hold(s sarama.ConsumerGroupSession, topic string, partition int32, next int64)
	Flush()
	End(s sarama.ConsumerGroupSession)
}

// GatedConsumerGroupBuilder is ConsumerGroupBuilder whose in-order marks
// pass through gate (nil: none).
func GatedConsumerGroupBuilder(sc *sarama.Config, gate MarkGate) goka.ConsumerGroupBuilder {
	return func(brokers []string, group, clientID string) (sarama.ConsumerGroup, error) {
		cg, err := goka.ConsumerGroupBuilderWithConfig(ownConfig(sc))(brokers, group, clientID) // its own copy: see clients.go
		if err != nil {
			return nil, err
		}
		return &sessionLoop{ConsumerGroup: cg, gate: gate}, nil
	}
}

type sessionLoop struct {
	sarama.ConsumerGroup
	gate MarkGate
}

// minSession is how long a session must last not to count as a churn; churning
// sessions back off (up to maxChurnBackoff) so a group that cannot settle does
// not spin. Normal rebalances last far longer than this and pay nothing.
const (
	minSession      = 100 * time.Millisecond
	maxChurnBackoff = 2 * time.Second
)

func (s *sessionLoop) Consume(ctx context.Context, topics []string, handler sarama.ConsumerGroupHandler) error {
	churn := retry.Backoff{First: 50 * time.Millisecond, Max: maxChurnBackoff}
	for {
		start := time.Now()
		if err := s.ConsumerGroup.Consume(ctx, topics, &inOrder{ConsumerGroupHandler: handler, gate: s.gate}); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) >= minSession {
			churn.Reset()
			continue
		}
		select {
		case <-time.After(churn.Next()): // jittered: members that churn together do not rejoin together
		case <-ctx.Done():
			return nil
		}
	}
}
