package topology_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencestream/fencestream/topology"
)

func ExampleExcerpt() {
	fmt.Println(topology.Excerpt("veh-1", 8))
	fmt.Println(topology.Excerpt(strings.Repeat("k", 1_048_300), 8))
	// Output:
	// veh-1
	// kkkkkkkk…[1048300 bytes]
}

// TestExcerptCutsOnARune: a multi-byte rune at the cut is left out whole, so
// an excerpt of valid UTF-8 stays valid; invalid UTF-8 is still bounded.
func TestExcerptCutsOnARune(t *testing.T) {
	s := strings.Repeat("ü", 600) // 2 bytes each
	got := topology.Excerpt(s, 255)
	if !utf8.ValidString(got) || !strings.HasPrefix(got, strings.Repeat("ü", 127)+"…[1200 bytes]") {
		t.Fatalf("Excerpt = %q", got)
	}
	bad := strings.Repeat("\x80", 1<<20)
	if got := topology.Excerpt(bad, 255); len(got) > 300 {
		t.Fatalf("Excerpt of invalid UTF-8: %d bytes", len(got))
	}
	if err := topology.ValidateKey(bad, 0); len(err.Error()) > 4*topology.MaxKeyBytes+100 {
		t.Fatalf("KeyError of a 1 MiB invalid key: %d bytes", len(err.Error()))
	}
}
