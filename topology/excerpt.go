package topology

import (
	"strconv"
	"unicode/utf8"
)

// Excerpt is s as a log line or an error may carry it: whole when it has at
// most limit bytes, otherwise its first limit bytes (cut on a UTF-8 boundary)
// followed by a marker with the full length, "…[1048300 bytes]". Keys and
// values come from producers the processor does not control; one of a
// megabyte must not become a megabyte of log per line (DESIGN rule 19).
func Excerpt(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := max(limit, 0)
	// Back to the start of a rune, but no further than one rune can be:
	// invalid UTF-8 is cut where it is.
	for back := 0; back < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); back++ {
		cut--
	}
	return s[:cut] + "…[" + strconv.Itoa(len(s)) + " bytes]"
}

// KeyExcerpt is Excerpt of a key at MaxKeyBytes: a valid key is shown whole.
func KeyExcerpt(key string) string { return Excerpt(key, MaxKeyBytes) }
