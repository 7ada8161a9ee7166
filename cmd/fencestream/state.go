package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
)

// errBrokerDataGone: the embedded broker has no data but local state exists.
var errBrokerDataGone = errors.New("the embedded broker's data is gone but the local state was kept")

// hasEntries reports whether dir exists and is not empty.
func hasEntries(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

// checkFreshBroker refuses to start an embedded broker from nothing next to
// kept local state: that state was built from records the new broker will
// never hold. Checked before the broker starts, so a refusal creates nothing.
func checkFreshBroker(brokerDir, stateDir string) error {
	if hasEntries(brokerDir) || !hasEntries(stateDir) {
		return nil
	}
	return fmt.Errorf("%w: %w: %s is empty or missing, %s holds state", statestore.ErrStateMismatch, errBrokerDataGone, brokerDir, stateDir)
}

// checkStateCluster compares the cluster recorded in each group's state
// directory under stateDir with the broker's, so a mismatch is refused before
// anything is announced or written (the processors would refuse it later).
func checkStateCluster(stateDir, clusterID string) error {
	entries, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := group.CheckStateDir(filepath.Join(stateDir, e.Name()), clusterID); err != nil {
			return err
		}
	}
	return nil
}
