package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/dirlock"
)

type stateMarker struct {
	ClusterID string `json:"cluster_id"`
	Created   string `json:"created"`
}

const markerFile = "fencestream-state.json"

// Check reports whether the state a group keeps in dir was built
// from cluster clusterID, without claiming the directory: nil when dir holds
// no marker yet (the group claims it when it starts), a statestore.ErrStateMismatch
// naming both clusters otherwise. A binary can refuse mismatched state before
// it announces anything.
func Check(dir, clusterID string) error {
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	var m stateMarker
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: %s is unreadable (%v); delete %s to rebuild state from the broker", statestore.ErrStateMismatch, path, err, dir)
	}
	if m.ClusterID != clusterID {
		return fmt.Errorf("%w: %s was built from cluster %q but the broker is cluster %q", statestore.ErrStateMismatch, dir, m.ClusterID, clusterID)
	}
	return nil
}

// Claim records which cluster the state in dir belongs to, and refuses a
// directory built from another cluster: Goka would otherwise fail later with a
// cryptic offset error, or silently mix two clusters' state.
func Claim(dir, clusterID string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return unwritableDir(dir, err)
	}
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		var m stateMarker
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%w: %s is unreadable (%v); delete %s to rebuild state from the broker", statestore.ErrStateMismatch, path, err, dir)
		}
		if m.ClusterID != clusterID {
			return fmt.Errorf("%w: %s was built from cluster %q but the broker is cluster %q; delete %s (state is rebuilt from the changelog topics) or point --state-dir elsewhere", statestore.ErrStateMismatch, dir, m.ClusterID, clusterID, dir)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		entries, _ := os.ReadDir(dir)
		entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == dirlock.FileName })
		if len(entries) > 0 {
			return fmt.Errorf("%w: %s holds state of unknown origin; delete it to rebuild state from the broker", statestore.ErrStateMismatch, dir)
		}
		m, _ := json.Marshal(stateMarker{ClusterID: clusterID, Created: time.Now().UTC().Format(time.RFC3339)})
		if err := os.WriteFile(path, m, 0o644); err != nil {
			_ = os.Remove(path) // an empty marker would read as unreadable next time
			return unwritableDir(dir, err)
		}
		return nil
	default:
		return fmt.Errorf("state directory: %w", err)
	}
}

// unwritableDir is err from writing the state directory dir, with the fix.
func unwritableDir(dir string, err error) error {
	return fmt.Errorf("%w: %s: %v; make it writable (permissions, free space, a read-write mount) and restart", statestore.ErrUnwritable, dir, err)
}
