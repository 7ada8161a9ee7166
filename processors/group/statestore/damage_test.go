package statestore_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lovoo/goka/storage"

	"github.com/fencestream/fencestream/processors/group/statestore"
)

// fill writes n keys and offset n, closes the table and returns its SSTs.
func fill(t *testing.T, dir string, n int) []string {
	t.Helper()
	b, err := statestore.Builder(statestore.Pebble, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, b)
	for i := range n {
		if err := s.Set(fmt.Sprintf("key-%06d", i), []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", 40)))); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.SetOffset(int64(n))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.pebble", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no sst written")
	}
	return ssts
}

// readAll reads every key of s, returning the first error.
func readAll(s storage.Storage, n int) error {
	for i := range n {
		if _, err := s.Get(fmt.Sprintf("key-%06d", i)); err != nil {
			return err
		}
	}
	it, err := s.Iterator()
	if err != nil {
		return err
	}
	defer it.Release()
	for it.Next() {
	}
	return it.Err()
}

// TestDamagedTableIsMovedAside: garbage in an SST (Pebble's default logger
// panicked, on every open) and a missing SST (an open error with no hint)
// both end in an error wrapping ErrDamaged, never a panic, and the next open
// moves the table aside (kept, with a callback for the metric) and starts it
// empty, so Goka recovers it from the changelog (offset: the default).
func TestDamagedTableIsMovedAside(t *testing.T) {
	const n = 200000
	for _, damage := range []string{"garbage", "missing", "manifest"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			ssts := fill(t, dir, n)
			if damage == "manifest" { // the chaos test's damage: the table cannot be opened
				ms, _ := filepath.Glob(filepath.Join(dir, "*.pebble", "MANIFEST-*"))
				for _, m := range ms {
					if err := os.WriteFile(m, []byte(strings.Repeat("\xde\xad\xbe\xef", 16)), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			} else if damage == "garbage" {
				f, err := os.OpenFile(ssts[0], os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", 16)), 100)
				_ = f.Close()
			} else {
				for _, f := range ssts { // which ones are live depends on compactions: all go
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			}
			var moved atomic.Int32
			b, err := statestore.Builder(statestore.Pebble, dir, statestore.OnDamaged(func(path, to string, cause error) {
				moved.Add(1)
				if _, err := os.Stat(to); err != nil {
					t.Errorf("moved-aside table %s: %v", to, err)
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			s, err := b("table", 3)
			if err == nil && moved.Load() == 0 {
				// Opens (garbage is found on read): reads fail with ErrDamaged.
				err = readAll(s, n)
				_ = s.Close()
				if !errors.Is(err, statestore.ErrDamaged) {
					t.Fatalf("reading a damaged table: %v, want ErrDamaged", err)
				}
				s, err = b("table", 3) // the restart
			}
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()
			if moved.Load() != 1 {
				t.Fatalf("moved aside %d times, want 1", moved.Load())
			}
			if o, err := s.GetOffset(-2); err != nil || o != -2 {
				t.Fatalf("offset of the rebuilt table = %d, %v; want the default (recover from the start)", o, err)
			}
			if err := s.Set("k", []byte("v")); err != nil {
				t.Fatal(err)
			}
			aside, _ := filepath.Glob(filepath.Join(dir, "table.3.pebble.damaged-*"))
			if len(aside) != 1 {
				t.Fatalf("damaged copies kept: %v", aside)
			}
		})
	}
}

// TestReadOnlyDirectoryIsACleanError: a table whose directory turns read-only
// fails its writes with ErrUnwritable naming the path, reports it once, and
// never reaches Pebble's WAL rotation (on main: "sync: unlock of unlocked
// mutex", a Go runtime fatal).
func TestReadOnlyDirectoryIsACleanError(t *testing.T) {
	dir := t.TempDir()
	var reported atomic.Int32
	b, err := statestore.Builder(statestore.Pebble, dir, statestore.OnUnwritable(func(error) { reported.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, b)
	path := filepath.Join(dir, "table.3.pebble")
	makeUnwritable(t, path)
	var werr error
	for i := 0; i < 1_000_000 && werr == nil; i++ {
		werr = s.Set(fmt.Sprintf("key-%07d", i), []byte(strings.Repeat("v", 100)))
	}
	if !errors.Is(werr, statestore.ErrUnwritable) || !strings.Contains(werr.Error(), path) {
		t.Fatalf("write to an unwritable table: %v, want ErrUnwritable naming %s", werr, path)
	}
	if reported.Load() != 1 {
		t.Fatalf("reported %d times, want once", reported.Load())
	}
	_ = s.Close()
	t.Log(werr)
}

// makeUnwritable makes dir refuse new files: chmod for a user, the immutable
// attribute for root (whom permissions do not bind).
func makeUnwritable(t *testing.T, dir string) {
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
