package produce

import (
	"strconv"
	"time"

	pb "github.com/fencestream/fencestream/codecs/hotkeypb"
)

// hotKeys measures per-key rates in fixed windows per key. It is not safe for
// concurrent use; the Producer calls it under its lock.
type hotKeys struct {
	topic    string
	salting  bool // the topic allows salting
	keyLimit int
	policy   HotKeyPolicy
	limit    float64 // records per window above which a key is hot

	keys      map[string]*keyRate
	lastPrune time.Time
}

type keyRate struct {
	windowStart time.Time
	count       int
	reported    time.Time // window start of the last report (not salting)
	salted      bool      // sticky: once split, a key stays split
	next        int       // round-robin salt bucket
}

func newHotKeys(topic string, salting bool, keyLimit int, p HotKeyPolicy) *hotKeys {
	if p.Threshold <= 0 {
		return nil
	}
	return &hotKeys{
		topic:    topic,
		salting:  salting,
		keyLimit: keyLimit,
		policy:   p,
		limit:    p.Threshold * p.Window.Seconds(),
		keys:     map[string]*keyRate{},
	}
}

// observe counts one record of key and returns the key to send it with, and
// a decision to record when the key has just become hot (nil otherwise).
func (h *hotKeys) observe(key string) (string, *pb.HotKey) {
	if h == nil {
		return key, nil
	}
	now := h.policy.Now()
	h.prune(now)
	k := h.keys[key]
	if k == nil {
		k = &keyRate{windowStart: now}
		h.keys[key] = k
	} else if now.Sub(k.windowStart) >= h.policy.Window {
		k.windowStart, k.count = now, 0
	}
	k.count++

	var decision *pb.HotKey
	if float64(k.count) > h.limit {
		rate := float64(k.count) / h.policy.Window.Seconds()
		switch {
		case k.salted:
		case h.salting && h.saltFits(key):
			k.salted = true
			decision = &pb.HotKey{Topic: h.topic, Key: key, RatePerS: rate, Salted: true, SaltBuckets: uint32(h.policy.SaltBuckets), DecidedAtMs: now.UnixMilli()}
		case !k.reported.Equal(k.windowStart):
			k.reported = k.windowStart
			decision = &pb.HotKey{Topic: h.topic, Key: key, RatePerS: rate, DecidedAtMs: now.UnixMilli()}
		}
	}
	if !k.salted {
		return key, decision
	}
	bucket := k.next
	k.next = (k.next + 1) % h.policy.SaltBuckets
	return saltedKey(key, bucket), decision
}

// saltFits says whether every salted form of key stays within the key limit;
// a consumer would dead-letter a longer one, so such a key is reported, not
// salted.
func (h *hotKeys) saltFits(key string) bool {
	return len(saltedKey(key, h.policy.SaltBuckets-1)) <= h.keyLimit
}

func saltedKey(key string, bucket int) string { return key + "#" + strconv.Itoa(bucket) }

// prune drops, once per window, keys whose window has ended. Salted keys stay:
// going back to the plain key would interleave it with its salted records.
func (h *hotKeys) prune(now time.Time) {
	if now.Sub(h.lastPrune) < h.policy.Window {
		return
	}
	h.lastPrune = now
	for key, k := range h.keys {
		if !k.salted && now.Sub(k.windowStart) >= h.policy.Window {
			delete(h.keys, key)
		}
	}
}
