package occupancy

import (
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Field numbers of geofencepb.Occupancy and Member that peekForward reads
// (codecs/proto/fencestream/v1/geofence.proto).
const (
	fieldFenceID       = 1
	fieldDevices       = 3
	fieldMembers       = 8
	fieldSaltBuckets   = 12
	fieldWatermarkHLC  = 13
	fieldPrunedHLC     = 14
	fieldNextPruneHLC  = 16
	fieldEntryKey      = 1
	fieldEntryValue    = 2
	fieldMemberInside  = 1
	fieldMemberLastHLC = 2
	fieldMemberTrigID  = 3
)

// peekForward decides from the encoded record raw (at key) whether Apply
// would return (false, Forward) for t, without decoding the record: the
// members map, most of a record and most of the cost of a hop, is scanned
// for t's device and checked as decoding would check it, never built. It
// returns the part key to forward to and true only then; on false (any other
// result, or bytes it does not read plainly) the caller decodes and applies
// as before, so the outcome is Apply's in every case. t must have passed
// validateLooped for key.
func peekForward(key string, raw []byte, t *geofencepb.Trigger, lim Limits) (string, bool) {
	var fence string
	var buckets, wm, pruned, next uint64
	earliestOut := uint64(math.MaxUint64) // the lowest last_hlc of a member outside (any entry: a lower bound)
	device := t.GetDeviceId()
	ok := scan(raw, func(num protowire.Number, typ protowire.Type, b []byte, v uint64) bool {
		switch num {
		case fieldFenceID, fieldDevices:
			if typ != protowire.BytesType || !utf8.Valid(b) {
				return false
			}
			if num == fieldFenceID {
				fence = string(b)
			}
		case fieldMembers:
			// the record holds the device, or the entry is odd: Apply decides
			if typ != protowire.BytesType {
				return false
			}
			out, last, ok := entryOf(b, device)
			if ok && out {
				earliestOut = min(earliestOut, last)
			}
			return ok
		case fieldSaltBuckets, fieldWatermarkHLC, fieldPrunedHLC, fieldNextPruneHLC:
			if typ != protowire.VarintType {
				return false
			}
			switch num {
			case fieldSaltBuckets:
				buckets = uint64(uint32(v))
			case fieldWatermarkHLC:
				wm = v
			case fieldPrunedHLC:
				pruned = v
			default:
				next = v
			}
		}
		return true
	})
	if !ok {
		return "", false
	}
	if fence == "" {
		fence = t.GetFenceId() // as Apply sets it
	}
	// Apply's first Forward branch with nothing to prune: nothing in the
	// record is written (prune may lower next_prune_hlc in memory, which
	// Apply does not report and the processor does not store).
	if fence != t.GetFenceId() || buckets == 0 || t.GetHlc() <= pruned {
		return "", false
	}
	if c := cutoff(max(wm, t.GetHlc()), lim.withDefaults()); c > next && earliestOut < c {
		return "", false
	}
	part := PartKey(key, &geofencepb.Occupancy{FenceId: fence, SaltBuckets: uint32(buckets)}, device)
	return part, part != ""
}

// entryOf reads the encoded members entry b: whether its member is outside
// and its last_hlc, and ok when it decodes and is not device's.
func entryOf(b []byte, device string) (out bool, last uint64, ok bool) {
	var id []byte
	inside, seen := false, false
	ok = scan(b, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) bool {
		switch num {
		case fieldEntryKey:
			if typ != protowire.BytesType || !utf8.Valid(b) {
				return false
			}
			id = b // the last one wins, as in decoding
		case fieldEntryValue:
			if typ != protowire.BytesType || seen {
				return false // a repeated value merges in decoding: leave it to Apply
			}
			seen = true
			return scan(b, func(num protowire.Number, typ protowire.Type, b []byte, v uint64) bool {
				switch num {
				case fieldMemberInside:
					inside = v != 0
					return typ == protowire.VarintType
				case fieldMemberLastHLC:
					last = v
					return typ == protowire.VarintType
				case fieldMemberTrigID:
					return typ == protowire.BytesType && utf8.Valid(b)
				}
				return true
			})
		}
		return true
	})
	return !inside, last, ok && string(id) != device
}

// scan calls f with every field of the encoded message b (the bytes of a
// length-delimited field, the value of a varint) and reports whether b is
// well formed and f returned true for every field.
func scan(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte, v uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || !num.IsValid() { // ConsumeTag lets numbers above 2^29-1 through; decoding does not
			return false
		}
		b = b[n:]
		var val []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 || !f(num, typ, val, v) {
			return false
		}
		b = b[n:]
	}
	return true
}
