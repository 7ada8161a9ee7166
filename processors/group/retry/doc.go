// Package retry paces retry loops: a jittered, capped exponential Backoff
// between attempts and a LogLimit on the warnings they log, so a broker or a
// topic that is gone costs neither a core nor the disk.
//
// Invariant: a Backoff never waits less than half its current step nor more
// than its Max; a LogLimit lets at most one line through per Every and counts
// the rest. It is a leaf: it imports nothing of the kit, so the kit's
// internal packages and applications share it.
package retry
