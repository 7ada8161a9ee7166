// Package produce is fencestream's only way to write keyed records: a
// key-discipline wrapper over Goka's emitter.
//
// Invariants, for every record a Producer sends:
//
//   - Its key passed topology.ValidateKey (non-empty, valid UTF-8, at most
//     the key limit). A refused key returns a *topology.KeyError naming the
//     topic, and nothing reaches the broker.
//   - It goes to the partition topology.PartitionFor names: the emitter is
//     built with topology.GokaEmitterHasher, never Goka's FNV default, and
//     with the sarama config of the cluster.Config it was given (never Goka's
//     process-global config).
//   - If its message type has a uint64 field named "hlc", the producer has
//     stamped it with its hybrid logical clock: the producer is the stamping
//     authority, so a value already in the message is overwritten. Stamps
//     are strictly increasing per Producer, and a Producer hands records to
//     the client in stamp order, one request in flight per broker, so on
//     every partition they are stored in stamp order.
//   - Its key is the caller's key, unless the key is hot (its rate over the
//     policy window is above the threshold) and the topic is declared with
//     Salting: then it is key#0 … key#(n-1) in turn, with the header
//     HeaderSaltedFrom carrying the original key, and the decision was
//     recorded once (hot-keys topic by default, and a metric). On topics
//     without Salting a hot key is only reported, once per window; its
//     records keep their key and their order.
//
// Metrics, on the Registerer WithRegisterer gives (default: Prometheus's
// default registry): fencestream_producer_records_total{topic},
// fencestream_producer_errors_total{topic},
// fencestream_producer_rejected_keys_total{topic,reason} and
// fencestream_hot_keys_total{topic,decision}. They belong to the registry, not
// the process: producers given one Registerer add up there, producers given
// different ones count apart. The hot-key record is codecs/hotkeypb's HotKey.
package produce
