package statestore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"

	"github.com/fencestream/fencestream/processors/group/statestore"
)

func open(t *testing.T, b storage.Builder) storage.Storage {
	t.Helper()
	s, err := b("table", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	return s
}

func keys(t *testing.T, it storage.Iterator) []string {
	t.Helper()
	defer it.Release()
	var out []string
	for it.Next() {
		out = append(out, string(it.Key()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStoresBehaveLikeGokas runs every store through what Goka's partition
// tables and views use, including reopening (the offset survives Close).
func TestStoresBehaveLikeGokas(t *testing.T) {
	for _, kind := range statestore.Kinds() {
		t.Run(string(kind), func(t *testing.T) {
			b, err := statestore.Builder(kind, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			behavesLikeGokas(t, kind, b)
		})
	}
}

// behavesLikeGokas is TestStoresBehaveLikeGokas's check of one store.
func behavesLikeGokas(t *testing.T, kind statestore.Kind, b storage.Builder) {
	t.Helper()
	s := open(t, b)
	if o, err := s.GetOffset(-7); err != nil || o != -7 {
		t.Fatalf("empty GetOffset = %d, %v", o, err)
	}
	for _, k := range []string{"b", "a", "ab", "c"} {
		if err := s.Set(k, []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("a"); err != nil || string(v) != "v-a" {
		t.Fatalf("Get(a) = %q, %v", v, err)
	}
	if v, err := s.Get("missing"); err != nil || v != nil {
		t.Fatalf("Get(missing) = %q, %v", v, err)
	}
	if has, _ := s.Has("c"); has {
		t.Fatal("deleted key still there")
	}
	if err := s.SetOffset(41); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRecovered(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOffset(42); err != nil {
		t.Fatal(err)
	}
	it, _ := s.Iterator()
	if got := keys(t, it); !slices.Equal(got, []string{"a", "ab", "b"}) {
		t.Fatalf("Iterator keys = %v (the offset must not show)", got)
	}
	it, _ = s.IteratorWithRange([]byte("a"), nil)
	if got := keys(t, it); !slices.Equal(got, []string{"a", "ab"}) {
		t.Fatalf("prefix iterator = %v", got)
	}
	it, _ = s.IteratorWithRange([]byte("ab"), []byte("c"))
	if got := keys(t, it); !slices.Equal(got, []string{"ab", "b"}) {
		t.Fatalf("range iterator = %v", got)
	}
	it, _ = s.Iterator()
	if !it.Seek([]byte("aa")) || string(it.Key()) != "ab" {
		t.Fatalf("Seek(aa) at %q", it.Key())
	}
	if v, _ := it.Value(); string(v) != "v-ab" {
		t.Fatalf("Value after Seek = %q", v)
	}
	it.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, b)
	if o, err := s.GetOffset(-1); err != nil || o != 42 {
		t.Fatalf("offset after reopen = %d, %v; want 42", o, err)
	}
	if v, _ := s.Get("ab"); string(v) != "v-ab" {
		t.Fatalf("value after reopen = %q", v)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if kind == statestore.GokaLevelDB {
		return // Goka's own storage panics on a second Close
	}
	if err := s.Close(); err != nil { // ours: a second Close is harmless
		t.Fatalf("second Close: %v", err)
	}
}

// TestKilledWriterNeverOverclaims kills (SIGKILL) a process that writes values
// and offsets the way Goka does (value of record i, then SetOffset(i)) and
// checks, after reopening, that the stored offset never covers a value the
// store does not hold: replay from it loses nothing.
func TestKilledWriterNeverOverclaims(t *testing.T) {
	for _, kind := range []statestore.Kind{statestore.Pebble, statestore.LevelDB} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWriterProcess$")
			cmd.Env = append(os.Environ(), "STATESTORE_WRITER_DIR="+dir, "STATESTORE_WRITER_KIND="+string(kind))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Kill once the writer has flushed offsets many times (every
			// 20 ms, ticks every 50 ms): unsynced writes reach the file when
			// Pebble's log flusher runs, which under -race on a loaded
			// machine took longer than three ticks.
			sc := bufio.NewScanner(out)
			for n := 0; n < 10 && sc.Scan(); {
				if sc.Text() == "tick" {
					n++
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			b, err := statestore.Builder(kind, dir)
			if err != nil {
				t.Fatal(err)
			}
			s := open(t, b)
			defer s.Close()
			off, err := s.GetOffset(-1)
			if err != nil {
				t.Fatal(err)
			}
			if off < 1 {
				entries, _ := os.ReadDir(dir)
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("no offset stored after ten ticks of flushes (got %d); %s holds %v", off, dir, names)
			}
			// Each key's value must be at least as new as its last record up
			// to the offset (newer is allowed: values run ahead of the offset).
			for i := max(1, off-writerKeys+1); i <= off; i++ {
				v, err := s.Get(writerKey(i))
				got, _ := strconv.ParseInt(string(v), 10, 64)
				if err != nil || got < i {
					t.Fatalf("offset %d stored but record %d's key holds %q (%v)", off, i, v, err)
				}
			}
			t.Logf("killed after offset %d was stored; every value up to it present", off)
		})
	}
}

const writerKeys = 5000

func writerKey(i int64) string { return fmt.Sprintf("dev-%d", i%writerKeys) }

// TestWriterProcess is the process TestKilledWriterNeverOverclaims kills: it
// writes until killed, printing "tick" after each offset flush interval.
func TestWriterProcess(t *testing.T) {
	dir := os.Getenv("STATESTORE_WRITER_DIR")
	if dir == "" {
		t.Skip("run by TestKilledWriterNeverOverclaims")
	}
	b, err := statestore.Builder(statestore.Kind(os.Getenv("STATESTORE_WRITER_KIND")), dir, statestore.OffsetInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, b)
	_ = s.MarkRecovered()
	tick := time.Now()
	for i := int64(1); ; i++ {
		// Keys repeat, so a later value overwrites an earlier one as in a table;
		// the check reads the last value of each key up to the stored offset.
		if err := s.Set(writerKey(i), []byte(strconv.FormatInt(i, 10))); err != nil {
			t.Fatal(err)
		}
		_ = s.SetOffset(i)
		if time.Since(tick) > 50*time.Millisecond {
			fmt.Println("tick")
			tick = time.Now()
		}
	}
}
