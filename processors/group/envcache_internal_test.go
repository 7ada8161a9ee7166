package group

import (
	"testing"

	"github.com/lovoo/goka/storage"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// TestEnvCacheFollowsTheStore: an entry is served only while the store holds
// what it was cached as: a write of the key that does not come back through
// put (a recovery's, a failed callback's) and opening or closing the
// partition's store drop it; a held entry is served to no one else; the
// budget bounds the encodings kept.
func TestEnvCacheFollowsTheStore(t *testing.T) {
	const table = "tab"
	c := newEnvCache(1<<20, false)
	build := c.storageBuilder(table, func(string, int32) (storage.Storage, error) { return storage.NewMemory(), nil })
	st, err := build(table, 3)
	if err != nil {
		t.Fatal(err)
	}
	env := func(state string) *kitpb.Envelope {
		e := &kitpb.Envelope{State: []byte(state), HasState: true}
		if _, err := encodeEnvelope(e); err != nil { // as Goka's SetValue leaves it
			t.Fatal(err)
		}
		return e
	}
	// write is a callback's: take, the store's write, put.
	write := func(key string, e *kitpb.Envelope) {
		t.Helper()
		held := c.take(3, key)
		b, _ := encodeEnvelope(e)
		if err := st.Set(key, b); err != nil {
			t.Fatal(err)
		}
		c.put(3, key, held, e, nil)
	}

	e1 := env("one")
	write("k", e1)
	h := c.take(3, "k")
	if h == nil || h.env != e1 {
		t.Fatalf("take after put = %v, want the envelope written", h)
	}
	if c.take(3, "k") != nil {
		t.Fatal("a held entry was served to a second callback")
	}
	// The callback fails after its write: never served again.
	if err := st.Set("k", []byte("\x00\x01other")); err != nil {
		t.Fatal(err)
	}
	if c.take(3, "k") != nil {
		t.Fatal("the entry of a callback that failed after its write was served")
	}
	e2 := env("two")
	write("k", e2) // the next callback reads the store and writes
	if h := c.take(3, "k"); h == nil || h.env != e2 {
		t.Fatalf("after a rewrite take = %v, want the new envelope", h)
	} else {
		c.put(3, "k", h, e2, nil) // read, unchanged
	}

	// A recovery (or a hot standby) writes the key: dropped.
	b, _ := encodeEnvelope(env("recovered"))
	if err := st.Set("k", b); err != nil {
		t.Fatal(err)
	}
	if c.take(3, "k") != nil {
		t.Fatal("entry served after another write of the key")
	}
	write("k", e2)
	if err := st.Delete("k"); err != nil {
		t.Fatal(err)
	}
	if c.take(3, "k") != nil {
		t.Fatal("entry served after the key was deleted")
	}

	// Opening the partition's store again (an assignment) and closing it drop
	// the partition; other partitions keep theirs.
	write("k", e2)
	other, err := build(table, 4)
	if err != nil {
		t.Fatal(err)
	}
	c.put(4, "j", nil, e1, nil)
	if _, err := build(table, 3); err != nil {
		t.Fatal(err)
	}
	if c.take(3, "k") != nil {
		t.Fatal("entry served after its partition's store was opened again")
	}
	if h := c.take(4, "j"); h == nil {
		t.Fatal("another partition's entry was dropped")
	} else {
		c.put(4, "j", h, e1, nil)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if c.take(4, "j") != nil {
		t.Fatal("entry served after its partition's store closed")
	}
	if c.used != 0 {
		t.Fatalf("%d bytes accounted with nothing cached", c.used)
	}

	// The budget: older entries go.
	small := newEnvCache(100, false)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		small.put(0, k, nil, env("0123456789abcdefghij"), nil)
		if small.used > small.budget {
			t.Fatalf("%d bytes cached, budget %d", small.used, small.budget)
		}
	}
	if n := len(small.parts[0]); n == 0 || n == 6 {
		t.Fatalf("%d of 6 entries kept in a budget of 4", n)
	}

	// Other tables are not wrapped.
	if s, _ := build("other", 3); s == nil {
		t.Fatal("no store for another table")
	} else if _, wrapped := s.(*envCachedStorage); wrapped {
		t.Fatal("another table's store was wrapped")
	}
}
