package quality_test

import (
	"bytes"
	"testing"

	"github.com/fencestream/fencestream/processors/quality"
)

// TestRunCrossings: on the sparse-fix scenario the debouncer finds most
// true crossings, almost no false ones, times them within a few seconds,
// and the same seed gives the same figures.
func TestRunCrossings(t *testing.T) {
	a, err := quality.RunCrossings(7, 300)
	if err != nil {
		t.Fatal(err)
	}
	b, err := quality.RunCrossings(7, 300)
	if err != nil {
		t.Fatal(err)
	}
	var wa, wb bytes.Buffer
	if err := quality.WriteCrossingTable(&wa, 7, a); err != nil {
		t.Fatal(err)
	}
	_ = quality.WriteCrossingTable(&wb, 7, b)
	if wa.String() != wb.String() {
		t.Fatalf("same seed, different reports:\n%s\n%s", wa.String(), wb.String())
	}
	t.Log("\n" + wa.String())
	if a.TrueCrossings < 50 || a.Found < a.TrueCrossings/2 || a.False > a.Found/20 || a.TimeErrP90S > 10 {
		t.Fatalf("crossings found %d of %d, false %d, time error p90 %.1f s", a.Found, a.TrueCrossings, a.False, a.TimeErrP90S)
	}
}
