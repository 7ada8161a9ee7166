// Package daemon is what every fencestream binary's main shares, and what a
// user's own main imports to look the same: the processor flags (cluster,
// TLS/SASL, state directory, standby, partitions, storage), log flags and an
// slog logger, a /metrics (and /healthz) server, a signal-aware context, and
// the composed topology (registered processors included).
//
// Invariant: servers bind to 127.0.0.1 unless an address says otherwise, and
// stop when the context ends.
package daemon
