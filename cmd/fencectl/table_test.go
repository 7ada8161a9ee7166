package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/topology"
)

func TestRuneWidth(t *testing.T) {
	for _, tc := range []struct {
		r    rune
		want int
	}{
		{'a', 1}, {'ж', 1}, {'車', 2}, {'両', 2}, {'한', 2}, {'Ａ', 2}, {'ｱ', 1},
		{'🚗', 2}, {'😀', 2}, {'\u0301', 0}, {'\u200d', 0}, {'\ufe0f', 0},
	} {
		if got := runeWidth(tc.r); got != tc.want {
			t.Errorf("runeWidth(%q) = %d, want %d", tc.r, got, tc.want)
		}
	}
}

// TestPartitionAlignsWideKeys: with CJK and emoji keys every column starts in
// the same terminal cell on every row. The widths are spelled out, not
// computed with the code under test.
func TestPartitionAlignsWideKeys(t *testing.T) {
	keys := []struct {
		key   string
		cells int
	}{{"veh-1", 5}, {"車両-7", 6}, {"🚗-42", 5}, {"пристрій-1", 10}, {"e\u0301-1", 3}}
	args := []string{"partition", "-n", "24"}
	for _, k := range keys {
		args = append(args, k.key)
	}
	code, out, errs := fencectl(t, args...)
	wantCode(t, code, 0, out, errs)
	const keyCol = 10 // widest key, пристрій-1
	want := "KEY" + strings.Repeat(" ", keyCol-3+2) + "PARTITION  OF  MURMUR2\n"
	for _, k := range keys {
		p := fmt.Sprint(topology.PartitionFor(k.key, 24))
		want += k.key + strings.Repeat(" ", keyCol-k.cells+2) + p + strings.Repeat(" ", 9-len(p)+2) +
			"24  " + fmt.Sprintf("0x%08x", topology.Murmur2([]byte(k.key))) + "\n"
	}
	if out != want {
		t.Fatalf("partition table\n%s\nwant\n%s", out, want)
	}
}

// A control character in a key is shown quoted, so it cannot break the table.
func TestPartitionQuotesControlCharacters(t *testing.T) {
	code, out, errs := fencectl(t, "partition", "a\tb", "c\nd")
	wantCode(t, code, 0, out, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], `"a\tb"  `) || !strings.HasPrefix(lines[2], `"c\nd"  `) {
		t.Fatalf("partition table:\n%s", out)
	}
}
