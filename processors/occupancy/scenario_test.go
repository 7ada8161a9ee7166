package occupancy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// scenario is a random history of triggers as debouncers would emit them: per
// (device, fence) ENTER and EXIT alternate, DWELL comes only during a stay,
// some exits are TIMEOUT or FENCE_DELETED, some TIMEOUT exits come for a device
// that had already left, and each device's HLC increases.
type scenario struct {
	devices  []string
	fences   []string
	byDevice map[string][]*geofencepb.Trigger // in the device's order
	all      []*geofencepb.Trigger            // device by device
}

func genScenario(r *rand.Rand, prefix string, nDevices, nFences, maxSteps int) *scenario {
	sc := &scenario{byDevice: map[string][]*geofencepb.Trigger{}}
	for f := range nFences {
		sc.fences = append(sc.fences, fmt.Sprintf("%sfence-%02d", prefix, f))
	}
	for d := range nDevices {
		dev := fmt.Sprintf("%sveh-%03d", prefix, d)
		sc.devices = append(sc.devices, dev)
		inside := map[string]bool{}
		dwelled := map[string]bool{}
		left := map[string]bool{}
		hlc := uint64(1 + r.IntN(1000))
		for range 1 + r.IntN(maxSteps) {
			f := sc.fences[r.IntN(nFences)]
			hlc += 1 + uint64(r.IntN(3))
			var t *geofencepb.Trigger
			switch {
			case inside[f] && !dwelled[f] && r.IntN(4) == 0:
				t = trig(dev, f, dwell, hlc)
				dwelled[f] = true
			case inside[f]:
				reason := confirmed
				switch x := r.IntN(10); {
				case x < 2:
					reason = timeout
				case x < 3:
					reason = fenceDeleted
				}
				t = trigR(dev, f, exit, reason, hlc)
				inside[f], left[f] = false, true
			case left[f] && r.IntN(6) == 0: // a TIMEOUT for a device that already left
				t = trigR(dev, f, exit, timeout, hlc)
			default:
				t = trig(dev, f, enter, hlc)
				inside[f], dwelled[f] = true, false
			}
			sc.byDevice[dev] = append(sc.byDevice[dev], t)
			sc.all = append(sc.all, t)
		}
	}
	return sc
}

// truth is the ground truth: a device is inside a fence iff its last trigger for
// that fence is ENTER or DWELL. It returns the sorted inside devices per fence.
func (sc *scenario) truth() map[string][]string {
	last := map[[2]string]*geofencepb.Trigger{}
	for _, t := range sc.all {
		last[[2]string{t.FenceId, t.DeviceId}] = t
	}
	out := map[string][]string{}
	for _, f := range sc.fences {
		out[f] = []string{}
	}
	for k, t := range last {
		if t.Type != exit {
			out[k[0]] = append(out[k[0]], k[1])
		}
	}
	for _, devs := range out {
		sort.Strings(devs)
	}
	return out
}

// pairOrder is a random interleaving that keeps each (device, fence)'s own
// order and nothing else (device order across fences is lost at the boundary).
func (sc *scenario) pairOrder(r *rand.Rand) []*geofencepb.Trigger {
	queues := map[[2]string][]*geofencepb.Trigger{}
	var keys [][2]string
	for _, t := range sc.all {
		k := [2]string{t.DeviceId, t.FenceId}
		if _, ok := queues[k]; !ok {
			keys = append(keys, k)
		}
		queues[k] = append(queues[k], t)
	}
	out := make([]*geofencepb.Trigger, 0, len(sc.all))
	for len(keys) > 0 {
		i := r.IntN(len(keys))
		q := queues[keys[i]]
		out = append(out, q[0])
		if len(q) == 1 {
			keys = slices.Delete(keys, i, i+1)
		} else {
			queues[keys[i]] = q[1:]
		}
	}
	return out
}

// shuffled is any order at all: EXITs overtake their ENTERs.
func (sc *scenario) shuffled(r *rand.Rand) []*geofencepb.Trigger {
	out := slices.Clone(sc.all)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// withDuplicatesAndReplays adds at-least-once noise to a delivery order: some
// triggers are delivered again (right away or later), and some devices replay
// a prefix of their triggers after later ones (a debouncer rebalance).
func (sc *scenario) withDuplicatesAndReplays(r *rand.Rand, order []*geofencepb.Trigger) []*geofencepb.Trigger {
	out := make([]*geofencepb.Trigger, 0, len(order)*2)
	for _, t := range order {
		out = append(out, t)
		if r.IntN(10) == 0 {
			out = append(out, t) // immediate re-delivery
		}
	}
	for range len(order) / 10 { // late duplicates
		t := order[r.IntN(len(order))]
		at := slices.Index(out, t) + 1
		at += r.IntN(len(out) - at + 1)
		out = slices.Insert(out, at, t)
	}
	for _, dev := range sc.devices {
		if r.IntN(3) != 0 {
			continue
		}
		trigs := sc.byDevice[dev]
		prefix := trigs[:1+r.IntN(len(trigs))]
		// Replay after the whole prefix has been delivered once.
		at := 0
		for _, t := range prefix {
			at = max(at, slices.Index(out, t)+1)
		}
		at += r.IntN(len(out) - at + 1)
		out = slices.Insert(out, at, prefix...)
	}
	return out
}
