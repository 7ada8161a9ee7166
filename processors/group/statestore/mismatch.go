package statestore

import "errors"

// ErrStateMismatch is wrapped when local state belongs to another cluster
// than the broker's: a group's or a view's state directory claimed by
// another cluster, state of unknown origin, or a store ahead of the broker.
// Retrying cannot fix it; the state must be deleted (it is rebuilt from the
// changelog topics) or the binary pointed at its own cluster.
var ErrStateMismatch = errors.New("local state does not belong to this broker")
