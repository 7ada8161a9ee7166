package occupancy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Records written before occupancy-members existed held their fence's
// members, and a full one was split: a tree of records, read here and never
// written now. A split fence is a tree of records. The fence's own record (key fence_id)
// is the root; a split record with part number n (the root is -1) routes a
// device it does not hold to its child (n+1)*SaltBuckets + b, key
// fence_id#<number>, where b hashes the device with the record's key. The
// root's children are fence#0 … fence#31, theirs fence#32 … fence#1055, and
// so on: keys grow by digits, not by a suffix per level.

// partID parses key as fence's own key (-1) or one of its part keys.
func partID(key, fence string) (int64, bool) {
	if key == fence {
		return -1, true
	}
	rest, ok := strings.CutPrefix(key, fence+"#")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n >= 0
}

func partKey(fence string, id int64) string { return fence + "#" + strconv.FormatInt(id, 10) }

// IsPart reports whether the record at key is a salted part of a split fence
// rather than a fence's own record. Read parts through Total of their fence.
func IsPart(key string, occ *geofencepb.Occupancy) bool {
	return occ.GetFenceId() != "" && key != occ.GetFenceId()
}

// Total reads the occupancy of fence through get (a table reader such as
// view.View.Get, returning nil, nil for an absent key). A fence that is not
// split is its record, returned as is. A split fence's parts are summed into
// a new record: count, the *_total and *_dropped counters add up;
// catalogue_version and last_change_ms are the highest; devices are the
// first cap (≤ 0: DefaultDevicesCap) devices inside any part, in order;
// members is left empty. Reading a split fence costs one get per part.
func Total(get func(key string) (*geofencepb.Occupancy, error), fence string, cap int) (*geofencepb.Occupancy, error) {
	root, err := get(fence)
	if err != nil || root.GetSaltBuckets() == 0 {
		return root, err
	}
	if cap <= 0 {
		cap = DefaultDevicesCap
	}
	sum := &geofencepb.Occupancy{FenceId: fence, SaltBuckets: root.GetSaltBuckets()}
	var inside []string
	var walk func(id int64, o *geofencepb.Occupancy) error
	walk = func(id int64, o *geofencepb.Occupancy) error {
		sum.Count += o.GetCount()
		sum.EntersTotal += o.GetEntersTotal()
		sum.ExitsTotal += o.GetExitsTotal()
		sum.DwellsTotal += o.GetDwellsTotal()
		sum.DuplicatesDropped += o.GetDuplicatesDropped()
		sum.StaleDropped += o.GetStaleDropped()
		sum.ExpiredDropped += o.GetExpiredDropped()
		sum.LastChangeMs = max(sum.LastChangeMs, o.GetLastChangeMs())
		sum.CatalogueVersion = max(sum.CatalogueVersion, o.GetCatalogueVersion())
		sum.WatermarkHlc = max(sum.WatermarkHlc, o.GetWatermarkHlc())
		for dev, m := range o.GetMembers() {
			if m.GetInside() {
				inside = append(inside, dev)
			}
		}
		k := int64(o.GetSaltBuckets())
		for b := range k {
			child := (id+1)*k + b
			co, err := get(partKey(fence, child))
			if err != nil {
				return err
			}
			if co != nil {
				if err := walk(child, co); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(-1, root); err != nil {
		return nil, err
	}
	slices.Sort(inside)
	sum.Devices = inside[:min(len(inside), cap)]
	return sum, nil
}
