// Package deadletter is the dead-letter contract of fencestream's kit: the
// headers every dead letter carries, the reasons it names, and the bounds of
// a dead letter cut down to fit. It imports nothing, so a tool that reads a
// dead-letter topic (or a producer in another language, by these strings)
// depends on the contract alone, not on the kit.
//
// Invariant: these strings are a wire contract: a name once published is
// never renamed or given another meaning.
package deadletter
