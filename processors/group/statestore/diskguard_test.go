package statestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"
)

// TestFullDiskFailsTablesBeforePebble: a disk that fills under open tables
// (less free than their next flushes need plus MinFreeSpace) fails every
// table as unwritable within a watch interval, without a write: OnUnwritable
// once per table, writes refused with ErrUnwritable naming the directory and
// the fix, Close prompt. A table opened on the full disk is refused the same
// way (full at start-up).
func TestFullDiskFailsTablesBeforePebble(t *testing.T) {
	dir := smallDisk(t, 32)
	var reported atomic.Int32
	b, err := Builder(Pebble, dir, OnUnwritable(func(error) { reported.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	var tables []storage.Storage
	for p := range int32(4) {
		s, err := b("t", p)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, s)
		for i := range 100 {
			if err := s.Set(fmt.Sprintf("k%d", i), []byte(strings.Repeat("v", 200))); err != nil {
				t.Fatal(err)
			}
		}
	}
	filled := time.Now()
	fillDisk(t, dir, 1<<20) // below the 4 MB kept free
	for deadline := time.Now().Add(30 * time.Second); reported.Load() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 tables reported unwritable 30 s after the disk filled", reported.Load())
		}
	}
	t.Logf("all 4 tables failed %v after the disk filled", time.Since(filled).Round(time.Millisecond))
	werr := tables[0].Set("k", []byte("v"))
	if !errors.Is(werr, ErrUnwritable) || !strings.Contains(werr.Error(), dir) || !strings.Contains(werr.Error(), "free") || !strings.Contains(werr.Error(), "make it writable") {
		t.Fatalf("write after the disk filled: %v; want ErrUnwritable naming %s, the free space and the fix", werr, dir)
	}
	for _, s := range tables {
		closed := time.Now()
		_ = s.Close()
		if d := time.Since(closed); d > 10*time.Second {
			t.Fatalf("Close took %v", d)
		}
	}
	if _, err := b("t", 9); !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("opening a table on the full disk: %v; want ErrUnwritable naming %s", err, dir)
	}
	b2, _ := Builder(Pebble, dir)
	if _, err := b2("t", 0); !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("a new builder opening a table on the full disk: %v; want ErrUnwritable saying how much is free", err)
	}
	t.Log(werr)
}

// TestRefusedLogDoesNotCrash: with the watch not looking, a disk that fills
// completely under a table makes Pebble's log writes fail; writes go on
// until Pebble rotates its log several times. Without guardFS that rotation
// panics with Pebble's mutex released ("fatal error: sync: unlock of unlocked
// mutex", which no recover catches), so the table runs in a child process.
// With it, the table fails as unwritable, naming its path, and closes.
func TestRefusedLogDoesNotCrash(t *testing.T) {
	if dir := os.Getenv("STATESTORE_REFUSED_LOG_DIR"); dir != "" {
		refusedLog(t, dir)
		return
	}
	dir := smallDisk(t, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRefusedLogDoesNotCrash$", "-test.v")
	cmd.Env = append(os.Environ(), "STATESTORE_REFUSED_LOG_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("child did not finish within 2 minutes (a hang):\n%s", out)
	}
	if err != nil || strings.Contains(string(out), "fatal error") || strings.Contains(string(out), "panic") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "refused log: clean") {
		t.Fatalf("child did not report a clean failure:\n%s", out)
	}
}

func refusedLog(t *testing.T, dir string) {
	cfg := defaults()
	cfg.minFree = 0
	w := newDirWatch(dir, cfg)
	w.every, w.fileWait = time.Hour, time.Hour // the watch must not find the full disk first
	st, err := watchedPebbleBuilder(dir, cfg, w)("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*pebbleStore)
	value := []byte(strings.Repeat("v", 1000))
	for i := range 100 {
		if err := s.Set(fmt.Sprintf("k%06d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	fillDisk(t, dir, 0)
	var werr error
	for i := 0; i < 20_000 && werr == nil; i++ { // 20 MB: memtables of 256 KB, 512 KB, 1 MB...
		werr = s.Set(fmt.Sprintf("k%06d", i), value)
	}
	closed := time.Now()
	cerr := make(chan error, 1)
	go func() { cerr <- s.Close() }()
	select {
	case err := <-cerr:
		if err != nil && strings.Contains(err.Error(), "abandoned") {
			t.Fatalf("Close was abandoned: Pebble was left holding a lock (%v); the writes said %v", err, werr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Close hung for 30 s; the writes said %v", werr)
	}
	path := filepath.Join(dir, "t.0.pebble")
	if !errors.Is(werr, ErrUnwritable) || !strings.Contains(werr.Error(), path) {
		t.Fatalf("writes to a table on a full disk: %v; want ErrUnwritable naming %s", werr, path)
	}
	t.Logf("refused log: clean: %v; close took %v", werr, time.Since(closed).Round(time.Millisecond))
}

// TestCloseIsBounded: a Pebble Close that never returns (a mutex left held
// by a panic inside Pebble) is given up after the wait, with an error naming
// the table, so a stopping process stops.
func TestCloseIsBounded(t *testing.T) {
	dir := t.TempDir()
	b, err := Builder(Pebble, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*pebbleStore)
	release := make(chan struct{})
	s.closeWait = 200 * time.Millisecond
	s.closeDB = func() error { <-release; return s.closePebble() }
	start := time.Now()
	err = s.Close()
	took := time.Since(start)
	close(release)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "t.0.pebble")) {
		t.Fatalf("Close of a table whose Pebble never closes: %v; want an error naming the table", err)
	}
	if took > 5*time.Second {
		t.Fatalf("Close took %v, want about its 200 ms wait", took)
	}
}

// TestIdleTableDisk: a table's log is neither preallocated nor recycled, so
// a table holds about what was written to it: after 40 flushes of a small
// table its directory is under 1 MB (Pebble's defaults: 4.4 MB of log
// reserved per table, and up to three old logs kept for reuse).
func TestIdleTableDisk(t *testing.T) {
	dir := t.TempDir()
	b, err := Builder(Pebble, dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*pebbleStore)
	defer s.Close()
	value := []byte(strings.Repeat("v", 300))
	for round := range 40 {
		for i := range 100 {
			if err := s.Set(fmt.Sprintf("dev-%03d", i), value); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetOffset(int64(round + 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "t.0.pebble")
	used := diskUsage(t, path)
	logs, _ := filepath.Glob(filepath.Join(path, "*.log"))
	t.Logf("%d KB on disk, %d logs", used>>10, len(logs))
	if used > 1<<20 || len(logs) > 2 {
		t.Fatalf("an idle table of 100 keys uses %d KB with %d logs; want under 1 MB, at most 2 logs", used>>10, len(logs))
	}
}

// diskUsage is what du counts: allocated blocks of every file under dir.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if b, ok := statBlocks(fi); ok {
			n += b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func statBlocks(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Blocks * 512, true
}

// TestIdleTableIsFlushed: a table that stops being written is flushed by its
// directory's watch, so its log is empty and what it holds is its data.
func TestIdleTableIsFlushed(t *testing.T) {
	dir := t.TempDir()
	cfg := defaults()
	w := newDirWatch(dir, cfg)
	w.every, w.idle = 20*time.Millisecond, 300*time.Millisecond
	st, err := watchedPebbleBuilder(dir, cfg, w)("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	value := []byte(strings.Repeat("v", 300))
	for i := range 1000 { // 300 KB: one log past the first 256 KB memtable
		if err := st.Set(fmt.Sprintf("dev-%03d", i%100), value); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "t.0.pebble")
	for deadline := time.Now().Add(5 * time.Second); logBytes(path) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			h := st.(*pebbleStore).h
			t.Fatalf("log of an idle table still %d bytes after 30 s (unflushed %d, flushing %d, last write %d, clock %d)", logBytes(path), h.unflushed.Load(), h.flushing.Load(), h.lastWrite.Load(), w.clock.Load())
		}
	}
	v, err := st.Get("dev-042")
	if err != nil || string(v) != string(value) {
		t.Fatalf("after the idle flush: %q, %v", v, err)
	}
	t.Logf("idle table: %d KB on disk", diskUsage(t, path)>>10)
}

// TestFullDiskFailsLevelDB: the LevelDB store has the same watch: a disk
// filled under it fails its writes with ErrUnwritable naming the directory.
func TestFullDiskFailsLevelDB(t *testing.T) {
	dir := smallDisk(t, 32)
	var reported atomic.Int32
	b, err := Builder(LevelDB, dir, OnUnwritable(func(error) { reported.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	s, err := b("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 { // 1000 writes: not counted as unflushed (LevelDB reports no flushes)
		if err := s.Set(fmt.Sprintf("k%d", i%10), []byte(strings.Repeat("v", 200))); err != nil {
			t.Fatal(err)
		}
	}
	fillDisk(t, dir, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); reported.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("LevelDB table not reported unwritable 30 s after the disk filled")
		}
	}
	if err := s.Set("k", []byte("v")); !errors.Is(err, ErrUnwritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("write after the disk filled: %v; want ErrUnwritable naming %s", err, dir)
	}
}
