package once

import (
	"hash/fnv"
	"testing"
)

// TestFNV64aIsHashFNV: the inline digest is hash/fnv's FNV-1a, so digests
// stored by earlier versions still recognise a copy of the last input.
func TestFNV64aIsHashFNV(t *testing.T) {
	for _, s := range []string{"", "a", "ping", string(make([]byte, 300))} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := fnv64a([]byte(s)), h.Sum64(); got != want {
			t.Errorf("fnv64a(%q) = %x, want %x", s, got, want)
		}
	}
}
