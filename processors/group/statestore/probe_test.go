package statestore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProbeCostFollowsTime: the probe that writes and fsyncs a file runs at
// most once per interval however many bytes are written (a file probe every
// 32 KB was a third of occupancy's CPU), and a directory that turns
// unwritable between two file probes is still found by the cheap check,
// naming the path.
func TestProbeCostFollowsTime(t *testing.T) {
	dir := t.TempDir()
	cfg := defaults()
	w := newDirWatch(dir, cfg)
	w.fileWait = time.Hour // no second file probe in this test, however slow the machine
	st, err := watchedPebbleBuilder(dir, cfg, w)("table", 3)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*pebbleStore)
	defer s.Close()
	value := []byte(strings.Repeat("v", 1000))
	const n = 10_000 // 10 MB: 300 probes, 10 memtables of 1 MB
	for i := range n {
		if err := s.Set(fmt.Sprintf("key-%07d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.fileProbes.Load(); got != 1 {
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
	if got := w.fileProbes.Load(); got != 1 {
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

// smallDisk mounts a tmpfs of mb MB on a new directory and returns it
// (unmounted at cleanup), or skips the test saying why it cannot.
func smallDisk(t *testing.T, mb int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mb), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %d MB tmpfs on %s (%v: %s)", mb, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system leaves at most leave
// bytes free, and returns its path.
func fillDisk(t *testing.T, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * st.Bsize
		if free <= leave {
			return p
		}
		n := min(int64(len(buf)), free-leave)
		if _, err := f.Write(buf[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return p
			}
			t.Fatal(err)
		}
	}
}

// TestProbeWritesBytes: on a full tmpfs, creating an empty file succeeds (the
// probe did only that, and found nothing); the probe writes and fsyncs a block
// and fails.
func TestProbeWritesBytes(t *testing.T) {
	dir := smallDisk(t, 4)
	fillDisk(t, dir, 0)
	f, err := os.Create(filepath.Join(dir, "empty"))
	if err != nil {
		t.Fatalf("creating an empty file on the full tmpfs failed (%v): this test cannot tell the probes apart", err)
	}
	_ = f.Close()
	if err := newDirWatch(dir, defaults()).probeFile(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("probe on a full disk: %v, want ENOSPC", err)
	}
	if _, err := os.Stat(filepath.Join(dir, probeName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("probe file left behind: %v", err)
	}
}
