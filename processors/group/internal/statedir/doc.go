// Package statedir ties a local state directory to the Kafka cluster its
// state was built from: a marker file names the cluster id, written when a
// group or a view first claims the directory.
//
// Invariant: state is never used with a cluster other than the one its
// marker names, and a directory holding state of unknown origin is refused
// (statestore.ErrStateMismatch) rather than mixed with a new cluster's.
package statedir
