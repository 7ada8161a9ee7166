// Package host is how processors are hosted: a processor is one Module (its
// declaration, flags, groups and routes), and every binary is the set of
// modules it links. Binary (with Main) is a processor binary's whole main: the
// shared processor flags, each module's flags, the base topology extended by
// the modules' declarations, a /metrics, /healthz and /readyz server, a
// signal-aware context, and every module's Run. The query server and the
// all-in-one use the same pieces (Compose, RegisterFlags, RunAll, Routes).
//
// Invariants: a binary refuses a module set in which two modules share a
// name (naming where each was defined), two routes share a pattern, or two
// flags share a name; every group of every module gets the same flag-chosen
// options (Env.Group); servers bind to 127.0.0.1 unless an address says
// otherwise, and stop when the context ends. The package keeps no global
// state: there is no registry, only the modules a main names.
package host
