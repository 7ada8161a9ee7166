package dirlock_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/topology/dirlock"
)

func TestSecondLockIsRefusedWithThePID(t *testing.T) {
	dir := t.TempDir()
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.Acquire(dir)
	if !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("second Acquire = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("error %q does not name %s and pid %d", err, dir, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	_ = l2.Release()
	_ = l2.Release()
}

// TestHelperHoldsLock is the other process of TestLockAcrossProcesses.
func TestHelperHoldsLock(t *testing.T) {
	dir := os.Getenv("DIRLOCK_HOLD")
	if dir == "" {
		t.Skip("helper process")
	}
	if _, err := dirlock.Acquire(dir); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	_, _ = os.Stdin.Read(make([]byte, 1)) // hold until the parent closes stdin
}

func TestLockAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsLock$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked" {
		t.Fatalf("helper: %q, %v", buf, err)
	}
	_, err = dirlock.Acquire(dir)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Acquire while another process holds it = %v, want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, dirlock.FileName)); strings.TrimSpace(string(b)) != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("refused Acquire changed the lock file: %q", b)
	}
	_ = cmd.Process.Kill() // a killed holder frees the lock
	_ = stdin.Close()
	_ = cmd.Wait()
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	_ = l.Release()
}
