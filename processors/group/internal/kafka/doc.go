// Package kafka is how the kit talks to Kafka through Goka and sarama: the
// client builders that give every Goka client its own copy of the kit's
// sarama config (never Goka's global one), the consumer group that keeps
// Consume running across rebalances and commits each partition in input
// order (consumergroup.go, inorder.go), Goka's topic manager reduced to
// checks, the producer's flush setting, Goka's logger, and the cluster
// queries a state directory is tied to.
//
// Invariants:
//   - Every client built here gets its own copy of the sarama config: Goka's
//     builders write into the config they are given while other clients read it.
//   - An input's offset is committed only once it and every earlier input of
//     its partition were marked (inorder.go).
//   - Goka never creates a topic and never sleeps after a rebalance.
//
// It is internal: applications configure the kit through its options, not
// through sarama. It imports no public kit package but the retry leaf.
package kafka
