package statestore

import (
	"fmt"
	"testing"
)

// TestFlushOnCloseLeavesNoLogToReplay: a Pebble table closed with
// FlushOnClose reopens with no log to replay, and its values are all there;
// without it the open replays the log and flushes what it held (Pebble counts
// those bytes as flushed to level 0 by the reopened table).
func TestFlushOnCloseLeavesNoLogToReplay(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			opts := []Opt{PebbleMemory(1<<20, 1<<20)}
			if flush {
				opts = append(opts, FlushOnClose())
			}
			b, err := Builder(Pebble, t.TempDir(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			s, err := b("t", 0)
			if err != nil {
				t.Fatal(err)
			}
			const n = 1000
			for i := range n {
				if err := s.Set(fmt.Sprintf("k%04d", i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = b("t", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := s.(*pebbleStore).db.Metrics()
			// What the open replayed from the log, it flushed to level 0.
			replayed := m.Levels[0].TableBytesFlushed > 0
			t.Logf("reopened: %d flushes, %d bytes flushed to level 0", m.Flush.Count, m.Levels[0].TableBytesFlushed)
			if replayed == flush {
				t.Errorf("replayed a log at open: %v, want %v", replayed, !flush)
			}
			if v, err := s.Get(fmt.Sprintf("k%04d", n-1)); err != nil || string(v) != "v" {
				t.Fatalf("last value after reopen: %q, %v", v, err)
			}
		})
	}
}
