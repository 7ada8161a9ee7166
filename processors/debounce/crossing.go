package debounce

import (
	"math"
	"slices"
	"strings"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
)

// appendCrossings appends a CROSS trigger for every fence with Crossing on
// that the segment from the device's previous fix (st's last position, time
// and accuracy, not yet updated) to p passes through although neither fix
// is inside it and the device has no live state for it (a fix inside is
// ENTER's and EXIT's business). The segment must run inside the fence for
// more than the two fixes' σ together, and the middle of that stretch must
// be crossSigmas σ of the interpolated position deep, so noise alone
// rarely makes one. The
// crossing's event time is interpolated between the fixes' device times to
// the middle of the longest inside stretch; its HLC, and so its trigger id,
// is p's, so a replay makes the same trigger. Fixes farther apart than the
// debouncer's SilenceTimeout make none. Sorted by fence id.
func appendCrossings(out []*geofencepb.Trigger, st *geofencepb.DeviceState, p *geofencepb.Ping, snap *fences.Snapshot, defaults Settings, implausible bool) []*geofencepb.Trigger {
	t0, t1 := st.LastEventTimeMs, p.GetDeviceTimeMs()
	// Past the silence timeout the device may have gone anywhere: a
	// straight line says nothing (and would search a city's fences).
	if st.Pings == 0 || implausible || t1 <= t0 || t1-t0 > defaults.SilenceTimeout.Milliseconds() {
		return out
	}
	lat1, lon1, lat2, lon2 := st.LastLat, st.LastLon, p.GetLat(), p.GetLon()
	dLon := math.Mod(lon2-lon1+540, 360) - 180
	midLat, midLon := (lat1+lat2)/2, math.Mod(lon1+dLon/2+540, 360)-180
	dy := (lat2 - lat1) * metresPerDegree
	dx := dLon * metresPerDegree * math.Cos(midLat*math.Pi/180)
	half := math.Hypot(dx, dy) / 2
	if half == 0 {
		return out
	}
	first := len(out)
	// Every fence the segment touches is within half its length of its
	// middle, so the index's candidates there cover them all.
	snap.Near(midLat, midLon, half+accuracyMarginM, func(f *fences.Fence) bool {
		s := Resolved(defaults, f)
		if !s.Crossing || FenceStateOf(st, f.ID) != nil {
			return true
		}
		if !(f.SignedDistance(lat1, lon1) < 0 && f.SignedDistance(lat2, lon2) < 0) {
			return true
		}
		insideM, mid := f.Chord(lat1, lon1, lat2, lon2)
		s1, s2 := sigmaOf(s, st.LastAccuracyM), sigmaOf(s, p.GetAccuracyM())
		if !(insideM > s1+s2) {
			return true
		}
		// Deep enough: the chord's middle, interpolated between two noisy
		// fixes, is off by σ = √(((1−m)σ₁)² + (mσ₂)²); a segment that
		// only grazes the fence by less than crossSigmas of it is noise.
		sigmaMid := math.Hypot((1-mid)*s1, mid*s2)
		if !(f.SignedDistance(lat1+(lat2-lat1)*mid, math.Mod(lon1+dLon*mid+540, 360)-180) > crossSigmas*sigmaMid) {
			return true
		}
		h := p.GetHlc()
		out = append(out, &geofencepb.Trigger{
			TriggerId:        geofence.TriggerID(st.DeviceId, f.ID, geofencepb.TriggerType_TRIGGER_TYPE_CROSS, h),
			DeviceId:         st.DeviceId,
			FenceId:          f.ID,
			Type:             geofencepb.TriggerType_TRIGGER_TYPE_CROSS,
			Reason:           geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED,
			EventTimeMs:      t0 + int64(math.Round(float64(t1-t0)*mid)),
			Hlc:              h,
			CatalogueVersion: snap.Version(),
			Lat:              lat1 + (lat2-lat1)*mid,
			Lon:              math.Mod(lon1+dLon*mid+540, 360) - 180,
		})
		return true
	})
	slices.SortFunc(out[first:], func(a, b *geofencepb.Trigger) int { return strings.Compare(a.FenceId, b.FenceId) })
	return out
}

// crossSigmas is how deep, in σ of the interpolated position, the middle of
// a crossing's inside stretch must be.
const crossSigmas = 2

// sigmaOf is a fix's noise scale as the sprt detector weighs it (at least
// 1 m), or its accuracy when the fence's rule sets no floor or scale.
func sigmaOf(s Settings, accuracyM float64) float64 {
	scale := s.AccuracyScale
	if scale == 0 {
		scale = 1
	}
	return max(s.AccuracyFloorM, minSigmaM, scale*accuracyM)
}
