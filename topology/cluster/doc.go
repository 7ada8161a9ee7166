// Package cluster says how to reach a Kafka cluster: bootstrap brokers, TLS and
// SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512). It yields the same settings for
// sarama (and so Goka) and for franz-go, so every client of a binary connects the
// same way.
//
// Invariant: every sarama config it builds starts consumer groups at the oldest
// offset. Goka's default (newest) silently skips records produced while a new
// group is joining; fencestream never uses it.
package cluster
