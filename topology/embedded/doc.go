// Package embedded runs a Kafka-protocol broker in-process (franz-go's kfake)
// listening on 127.0.0.1, so fencestream works on a machine with no Kafka.
//
// Invariant: clients reach it only over TCP, exactly as they reach a real
// cluster; with a data directory its topics, offsets and groups survive a
// restart, so Goka's local state next to it stays consistent with it.
//
// SASL users are not state: the options of each Start are the only users, and
// no password (nor kfake's salted SCRAM passwords, which are as good as one)
// is kept on disk. What is kept is the fact that a directory's broker required
// SASL (a 0600 file with no secret in it), so a start that forgot the users
// is refused (ErrUsersMissing) rather than opening the cluster; DropSASL opens
// it on purpose.
package embedded
