package occupancy

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Field numbers of geofencepb.Occupancy and Member that peekForward reads
// (codecs/proto/fencestream/v1/geofence.proto).
const (
	fieldFenceID      = 1
	fieldDevices      = 3
	fieldMembers      = 8
	fieldSaltBuckets  = 12
	fieldWatermarkHLC = 13
	fieldPrunedHLC    = 14
	fieldNextPruneHLC = 16
	fieldEntryKey     = 1
	fieldEntryValue   = 2
	fieldMemberTrigID = 3
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
			return typ == protowire.BytesType && entryValid(b, device)
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
	// Apply's first Forward branch without pruning (prune scans only past
	// next_prune_hlc): nothing in the record changes.
	if fence != t.GetFenceId() || buckets == 0 || t.GetHlc() <= pruned ||
		cutoff(max(wm, t.GetHlc()), lim.withDefaults()) > next {
		return "", false
	}
	part := PartKey(key, &geofencepb.Occupancy{FenceId: fence, SaltBuckets: uint32(buckets)}, device)
	return part, part != ""
}

// entryValid reports whether the encoded members entry b decodes and is not
// device's.
func entryValid(b []byte, device string) bool {
	var id []byte
	ok := scan(b, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) bool {
		switch num {
		case fieldEntryKey:
			if typ != protowire.BytesType || !utf8.Valid(b) {
				return false
			}
			id = b // the last one wins, as in decoding
		case fieldEntryValue:
			if typ != protowire.BytesType {
				return false
			}
			return scan(b, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) bool {
				return num != fieldMemberTrigID || (typ == protowire.BytesType && utf8.Valid(b))
			})
		}
		return true
	})
	return ok && string(id) != device
}

// scan calls f with every field of the encoded message b (the bytes of a
// length-delimited field, the value of a varint) and reports whether b is
// well formed and f returned true for every field.
func scan(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte, v uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
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
