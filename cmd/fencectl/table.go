package main

import (
	"io"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// table lays out columns by terminal display width. text/tabwriter counts
// runes, so a CJK or emoji key (two cells per rune) pushed every later
// column of its row out of line.
type table struct {
	rows [][]string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// write prints the rows with two spaces between columns; the last column is
// not padded.
func (t *table) write(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-displayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// displayWidth is the number of terminal cells s takes.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

// runeWidth: 2 for East Asian wide and fullwidth runes (CJK, most emoji), 0
// for combining marks and format characters (zero-width joiner, variation
// selectors), 1 otherwise.
func runeWidth(r rune) int {
	if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// printableCell returns s, or its quoted Go form when it holds control
// characters (a tab or newline in a key would break the table).
func printableCell(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
