package group

import "github.com/fencestream/fencestream/processors/group/internal/statedir"

// CheckStateDir reports whether the state a group keeps in dir was built
// from cluster clusterID, without claiming the directory: nil when dir holds
// no marker yet (the group claims it when it starts), a
// statestore.ErrStateMismatch naming both clusters otherwise. A binary can
// refuse mismatched state before it announces anything.
func CheckStateDir(dir, clusterID string) error { return statedir.Check(dir, clusterID) }
