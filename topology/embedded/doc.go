// Package embedded runs a Kafka-protocol broker in-process (franz-go's kfake)
// listening on 127.0.0.1, so fencestream works on a machine with no Kafka.
//
// Invariant: clients reach it only over TCP, exactly as they reach a real
// cluster; with a data directory its topics, offsets and groups survive a
// restart, so Goka's local state next to it stays consistent with it.
package embedded
