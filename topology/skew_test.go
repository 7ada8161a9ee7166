package topology_test

import (
	"testing"

	"github.com/fencestream/fencestream/topology"
)

func TestSkewOf(t *testing.T) {
	even := topology.SkewOf("t", map[int32]int64{0: 10, 1: 10, 2: 10})
	if even.Ratio != 1 || even.Alert() {
		t.Fatalf("even topic: %+v", even)
	}
	// One hot partition of four: max 40, mean 13.75 → 2.9, no alert; 50 → 3.3, alert.
	warm := topology.SkewOf("t", map[int32]int64{0: 5, 1: 40, 2: 5, 3: 5})
	if warm.MaxPartition != 1 || warm.Alert() {
		t.Fatalf("warm topic: %+v", warm)
	}
	hot := topology.SkewOf("t", map[int32]int64{0: 5, 1: 50, 2: 5, 3: 5})
	if !hot.Alert() || hot.Total != 65 {
		t.Fatalf("hot topic: %+v", hot)
	}
	if empty := topology.SkewOf("t", map[int32]int64{0: 0, 1: 0}); empty.Ratio != 0 || empty.Alert() {
		t.Fatalf("empty topic: %+v", empty)
	}
}
