package statestore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeCostFollowsTime: the directory probe that creates a file runs at
// most once per interval however many bytes are written (it ran every 32 KB:
// a third of occupancy's CPU), and a directory that turns unwritable between
// two file probes is still found by the cheap check before any WAL
// rotation, naming the path.
func TestProbeCostFollowsTime(t *testing.T) {
	dir := t.TempDir()
	b, err := Builder(Pebble, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b("table", 3)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*pebbleStore)
	defer s.Close()
	s.h.fileEvery = time.Hour // no second file probe in this test, however slow the machine
	value := []byte(strings.Repeat("v", 1000))
	const n = 10_000 // 10 MB: 300 probes, 10 memtables of 1 MB
	for i := range n {
		if err := s.Set(fmt.Sprintf("key-%07d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.h.fileProbes.Load(); got != 1 {
		t.Fatalf("file probes after %d bytes = %d, want 1 (one per interval)", n*len(value), got)
	}
	path := filepath.Join(dir, "table.3.pebble")
	unwritableDir(t, path)
	var werr error
	for i := 0; i < 1_000_000 && werr == nil; i++ {
		werr = s.Set(fmt.Sprintf("key-%07d", i), value)
	}
	if !errors.Is(werr, ErrUnwritable) || !strings.Contains(werr.Error(), path) {
		t.Fatalf("write to an unwritable table: %v, want ErrUnwritable naming %s", werr, path)
	}
	if got := s.h.fileProbes.Load(); got != 1 {
		t.Fatalf("file probes = %d: the unwritable directory was found by a file probe, not the cheap check", got)
	}
}

// unwritableDir makes dir refuse new files (chmod for a user, the immutable
// attribute for root).
func unwritableDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("root, and chattr +i %s failed (%v: %s): cannot make a directory unwritable here", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}
