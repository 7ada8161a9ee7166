// Package boundedlog bounds what a log line carries: New wraps a slog
// logger so that the message and every string, error and formatted attribute
// is cut to ValueLimit bytes.
//
// Invariant: no line logged through New carries an attribute (or message)
// longer than ValueLimit plus the excerpt's marker, whatever a key, a value
// or an error quoting them holds. The kit logs every group through it; it is
// a leaf (it imports only topology's Excerpt) so applications and the kit's
// internal packages use it without the kit's root.
package boundedlog
