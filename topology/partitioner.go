package topology

import (
	"hash"

	"github.com/lovoo/goka"
)

// Murmur2 is Kafka's default partitioner hash (org.apache.kafka.common.utils.Utils.murmur2),
// computed here so that a library or broker upgrade cannot silently relocate keys.
func Murmur2(data []byte) uint32 { return murmur2(data) }

// PositiveMurmur2 is murmur2 with the sign bit cleared, as Kafka's Java client uses it
// (Utils.toPositive). Math.abs would disagree on about half the keys whose hash is negative.
func PositiveMurmur2(data []byte) uint32 { return murmur2(data) & 0x7fffffff }

// PartitionFor is the partition Kafka's default partitioner gives key on a topic with
// the given number of partitions: (murmur2(utf8 key) & 0x7fffffff) % partitions.
// It returns -1 when partitions is not positive.
func PartitionFor(key string, partitions int32) int32 {
	if partitions <= 0 {
		return -1
	}
	// Generic over string and []byte: hashing the key costs no []byte copy.
	return int32((murmur2(key) & 0x7fffffff) % uint32(partitions))
}

func murmur2[T ~string | ~[]byte](data T) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	i := 0
	for ; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch length - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// murmur2Hash adapts the pinned partitioner to hash.Hash32, the form Goka asks for.
// Goka computes partition = int32(Sum32()) % n and flips a negative result, so Sum32
// must return the masked value: unmasked murmur2 would disagree on ~40% of keys.
type murmur2Hash struct{ buf []byte }

// NewHasher returns a hash.Hash32 whose Sum32 is PositiveMurmur2 of everything written.
// Use it via GokaProcessorOptions, GokaViewOptions or GokaEmitterOptions.
func NewHasher() hash.Hash32 { return &murmur2Hash{buf: make([]byte, 0, 64)} }

func (h *murmur2Hash) Write(p []byte) (int, error) { h.buf = append(h.buf, p...); return len(p), nil }
func (h *murmur2Hash) Sum(b []byte) []byte {
	s := h.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}
func (h *murmur2Hash) Reset()         { h.buf = h.buf[:0] }
func (h *murmur2Hash) Size() int      { return 4 }
func (h *murmur2Hash) BlockSize() int { return 4 }
func (h *murmur2Hash) Sum32() uint32  { return PositiveMurmur2(h.buf) }

// GokaProcessorHasher, GokaViewHasher and GokaEmitterHasher are the only hasher options
// fencestream passes to Goka; the builders in processors/ and fenceview always add them,
// so nothing can fall back to Goka's FNV-1a DefaultHasher.
func GokaProcessorHasher() goka.ProcessorOption { return goka.WithHasher(NewHasher) }

// GokaViewHasher: see GokaProcessorHasher.
func GokaViewHasher() goka.ViewOption { return goka.WithViewHasher(NewHasher) }

// GokaEmitterHasher: see GokaProcessorHasher.
func GokaEmitterHasher() goka.EmitterOption { return goka.WithEmitterHasher(NewHasher) }
