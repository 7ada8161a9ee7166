// Package daemon is what every fencestream binary's main shares: log flags and
// an slog logger, a /metrics (and /healthz) server, and a signal-aware context.
//
// Invariant: servers bind to 127.0.0.1 unless an address says otherwise, and
// stop when the context ends.
package daemon
