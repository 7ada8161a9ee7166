package fleet

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
)

// Keying is a strategy for choosing the record key (and so the partition)
// of a trigger: the candidates of the seed's ordering table.
type Keying int

const (
	// KeyDevice keys by device_id: the project's choice (per-device order).
	KeyDevice Keying = iota
	// KeyFence keys by fence_id: per-fence order, power-law skew.
	KeyFence
	// KeyPair keys by device_id|fence_id: per-(device, fence) order only.
	KeyPair
	// KeyRoundRobin sends no key and spreads records round robin.
	KeyRoundRobin
	// KeyNull sends no key; the producer's sticky partitioner fills a
	// random partition for a batch, then moves on.
	KeyNull
)

// Keyings lists every strategy in table order (a new slice each call: the
// caller may keep or change it).
func Keyings() []Keying { return []Keying{KeyDevice, KeyFence, KeyPair, KeyRoundRobin, KeyNull} }

var keyingNames = [...]string{"device", "fence", "pair", "round-robin", "null"}

// String returns the name ParseKeying accepts.
func (k Keying) String() string {
	if k >= 0 && int(k) < len(keyingNames) {
		return keyingNames[k]
	}
	return fmt.Sprintf("Keying(%d)", int(k))
}

// ParseKeying parses "device", "fence", "pair", "round-robin" or "null"
// (case-insensitive; "device_id", "fence_id" and "roundrobin" also work).
func ParseKeying(s string) (Keying, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "device", "device_id":
		return KeyDevice, nil
	case "fence", "fence_id":
		return KeyFence, nil
	case "pair":
		return KeyPair, nil
	case "round-robin", "roundrobin", "round_robin":
		return KeyRoundRobin, nil
	case "null", "none":
		return KeyNull, nil
	}
	return 0, fmt.Errorf("fleet: unknown keying %q (want device, fence, pair, round-robin or null)", s)
}

// KeyFor returns the record key of trigger t under strategy k: device_id,
// fence_id, device_id|fence_id, or "" (no key) for round-robin and null,
// whose partitions the producer assigns.
func KeyFor(t *geofencepb.Trigger, k Keying) string {
	switch k {
	case KeyDevice:
		return t.GetDeviceId()
	case KeyFence:
		return t.GetFenceId()
	case KeyPair:
		return t.GetDeviceId() + "|" + t.GetFenceId()
	}
	return ""
}

// Parameters of MeasureMisordering's model.
const (
	// stickyMeanBatch is the mean batch the null-key sticky partitioner
	// puts on one partition before switching.
	stickyMeanBatch = 16
	// consumerMaxFetch is the most records one fetch takes from a partition.
	consumerMaxFetch = 32
	// consumerCapacity bounds a consumer's speed, as a multiple of its fair
	// share (1/consumers) of the production rate: drawn uniformly, so a
	// consumer keeps up unless its partitions are hot.
	consumerCapacityMin, consumerCapacityMax = 2.0, 4.0
	// A consumer stalls (GC, a slow downstream call) after a fetch with
	// this probability, for an exponential time of this mean, in units of
	// one production interval.
	consumerStallP, consumerStallMean = 0.005, 50.0
)

// MeasureMisordering estimates how a keying strategy reorders each device's
// triggers between producer and consumers, and how evenly it loads the
// partitions.
//
// triggers is the production order, one record per production interval;
// each device's triggers must appear in that device's order. Each goes to
// a partition: keyed strategies use topology.PartitionFor (murmur2),
// round-robin cycles from a random partition, null fills random partitions
// in sticky batches (mean 16). Partition p is owned by consumer
// p % consumers; each consumer has its own random speed (2–4× its fair
// share of the production rate), visits its partitions round robin taking
// up to 32 available records per fetch, and now and then stalls. A record
// is consumed at the simulated time its consumer processes it.
//
// misorderedPerMillion counts, over every pair of consecutive triggers of
// one device, the pairs whose later trigger is consumed before the earlier
// one, per million pairs; KeyDevice gives exactly 0, since a device's
// triggers share a partition and so a consumer and its FIFO order. skew is
// the largest partition's record count over the mean (DESIGN §2 rule 11).
// partitions and consumers below 1 count as 1. The result depends only on
// the inputs and seed.
func MeasureMisordering(triggers []*geofencepb.Trigger, k Keying, partitions int32, consumers int, seed int64) (misorderedPerMillion, skew float64) {
	n := len(triggers)
	if n == 0 {
		return 0, 0
	}
	partitions = max(partitions, 1)
	consumers = max(consumers, 1)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6b6579696e67)) // "keying"

	// Produce.
	part := make([]int32, n)
	counts := make([]int, partitions)
	switch k {
	case KeyRoundRobin:
		off := rng.Int32N(partitions)
		for i := range part {
			part[i] = (off + int32(i)) % partitions
		}
	case KeyNull:
		cur, left := rng.Int32N(partitions), 0
		for i := range part {
			if left == 0 {
				if partitions > 1 {
					cur = (cur + 1 + rng.Int32N(partitions-1)) % partitions // another partition
				}
				left = 1 + rng.IntN(2*stickyMeanBatch-1)
			}
			part[i] = cur
			left--
		}
	default:
		for i, t := range triggers {
			part[i] = topology.PartitionFor(KeyFor(t, k), partitions)
		}
	}
	queues := make([][]int32, partitions)
	for i, p := range part {
		counts[p]++
		queues[p] = append(queues[p], int32(i))
	}
	maxCount := 0
	for _, c := range counts {
		maxCount = max(maxCount, c)
	}
	skew = float64(maxCount) / (float64(n) / float64(partitions))

	// Consume.
	consumed := make([]float64, n)
	active := min(consumers, int(partitions))
	for c := range active {
		var owned []int32
		for p := int32(c); p < partitions; p += int32(consumers) {
			if len(queues[p]) > 0 {
				owned = append(owned, p)
			}
		}
		crng := rand.New(rand.NewPCG(uint64(seed), uint64(c)+1))
		speed := (consumerCapacityMin + crng.Float64()*(consumerCapacityMax-consumerCapacityMin)) / float64(active)
		consume(owned, queues, consumed, speed, crng)
	}

	// Count per-device inversions of consecutive triggers.
	prev := make(map[string]int, 1024)
	var pairs, mis int
	for i, t := range triggers {
		d := t.GetDeviceId()
		if j, ok := prev[d]; ok {
			pairs++
			if consumed[i] < consumed[j] {
				mis++
			}
		}
		prev[d] = i
	}
	if pairs == 0 {
		return 0, skew
	}
	return float64(mis) / float64(pairs) * 1e6, skew
}

// consume simulates one consumer draining its partitions; record i arrives
// at time i and is stamped with the time it is processed.
func consume(owned []int32, queues [][]int32, consumed []float64, speed float64, rng *rand.Rand) {
	heads := make([]int, len(owned))
	left := 0
	for _, p := range owned {
		left += len(queues[p])
	}
	t := rng.Float64() * 10
	step := 1 / speed
	rr := 0
	for left > 0 {
		found := -1
		next := -1.0
		for j := range owned {
			o := (rr + j) % len(owned)
			q := queues[owned[o]]
			if heads[o] == len(q) {
				continue
			}
			arr := float64(q[heads[o]])
			if arr <= t {
				found = o
				break
			}
			if next < 0 || arr < next {
				next = arr
			}
		}
		if found < 0 {
			t = next // idle until the next record arrives
			continue
		}
		q := queues[owned[found]]
		fetchAt := t // the fetch returns what had arrived when it was sent
		for f := 0; f < consumerMaxFetch && heads[found] < len(q) && float64(q[heads[found]]) <= fetchAt; f++ {
			t += step
			consumed[q[heads[found]]] = t
			heads[found]++
			left--
		}
		rr = found + 1
		if rng.Float64() < consumerStallP {
			t += rng.ExpFloat64() * consumerStallMean
		}
	}
}
