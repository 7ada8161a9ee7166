package debounce

import (
	"sort"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// Upgrade moves per-fence state written in the v1 layout (the fences map) into
// FenceStates, so the rest of the package reads one layout. Idempotent.
func Upgrade(st *geofencepb.DeviceState) {
	//lint:ignore SA1019 reading the deprecated v1 field is the point
	legacy := st.Fences
	if len(legacy) == 0 {
		return
	}
	for id, fs := range legacy {
		if FenceStateOf(st, id) == nil {
			st.FenceStates = append(st.FenceStates, &geofencepb.FenceEntry{FenceId: id, State: fs})
		}
	}
	sort.Slice(st.FenceStates, func(i, j int) bool { return st.FenceStates[i].FenceId < st.FenceStates[j].FenceId })
	//lint:ignore SA1019 cleared once migrated
	st.Fences = nil
}

// FenceStateOf returns the device's state for one fence, nil when it is settled
// OUTSIDE. A device has live state for a handful of fences at most, so a linear
// scan beats a map.
func FenceStateOf(st *geofencepb.DeviceState, fenceID string) *geofencepb.FenceState {
	for _, e := range st.GetFenceStates() {
		if e.FenceId == fenceID {
			return e.State
		}
	}
	return nil
}

// setFenceState stores fs for fenceID, or removes the entry when fs is nil,
// keeping FenceStates sorted by fence id.
func setFenceState(st *geofencepb.DeviceState, fenceID string, fs *geofencepb.FenceState) {
	i := sort.Search(len(st.FenceStates), func(i int) bool { return st.FenceStates[i].FenceId >= fenceID })
	found := i < len(st.FenceStates) && st.FenceStates[i].FenceId == fenceID
	switch {
	case fs == nil && found:
		st.FenceStates = append(st.FenceStates[:i], st.FenceStates[i+1:]...)
	case fs == nil:
	case found:
		st.FenceStates[i].State = fs
	default:
		st.FenceStates = append(st.FenceStates, nil)
		copy(st.FenceStates[i+1:], st.FenceStates[i:])
		st.FenceStates[i] = &geofencepb.FenceEntry{FenceId: fenceID, State: fs}
	}
}
