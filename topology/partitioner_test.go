package topology_test

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology"
)

// Vectors from the seeds, observed on real brokers with Kafka's Java client.
func TestPartitionForSeedVectors(t *testing.T) {
	cases := []struct {
		partitions int32
		want       map[string]int32
	}{
		{6, map[string]int32{"user-1": 2, "user-2": 2, "user-3": 5, "user-4": 1, "user-5": 4, "user-6": 5}},
		{3, map[string]int32{"o-1": 0, "o-2": 0, "o-3": 1, "o-4": 1, "o-5": 2, "o-6": 1}},
	}
	for _, c := range cases {
		for key, want := range c.want {
			if got := topology.PartitionFor(key, c.partitions); got != want {
				t.Errorf("PartitionFor(%q, %d) = %d, want %d", key, c.partitions, got, want)
			}
		}
	}
}

// mathAbsPartition is the tempting mistake: Math.abs(hash) % n instead of
// (hash & 0x7fffffff) % n.
func mathAbsPartition(key string, n int32) int32 {
	h := int64(int32(topology.Murmur2([]byte(key))))
	if h < 0 {
		h = -h
	}
	return int32(h % int64(n))
}

func TestMathAbsDisagreesOnSeedVectors(t *testing.T) {
	for key, want := range map[string]int32{"o-2": 2, "o-5": 0} {
		if got := mathAbsPartition(key, 3); got != want {
			t.Errorf("Math.abs-style partition of %q = %d, the seeds say it gives %d", key, got, want)
		}
		if topology.PartitionFor(key, 3) == want {
			t.Errorf("PartitionFor(%q, 3) = %d agrees with the Math.abs mistake", key, want)
		}
	}
}

// randomKeys returns n keys of 0-300 bytes: ASCII, multi-byte UTF-8 (2, 3 and
// 4-byte runes mixed with ASCII) and arbitrary bytes. Seeded: failures repeat.
func randomKeys(n int) []string {
	rng := rand.New(rand.NewPCG(2026, 11))
	runes := []rune("abcxyz019-_#/:ÄöüßñçπжїґЇЖ中文車両キー한국🚗🛰️😀")
	keys := make([]string, 0, n)
	var b strings.Builder
	for i := range n {
		b.Reset()
		size := rng.IntN(301)
		switch i % 3 {
		case 0: // printable ASCII
			for range size {
				b.WriteByte(byte(0x20 + rng.IntN(0x5f)))
			}
		case 1: // UTF-8, up to size bytes
			for b.Len() < size {
				r := runes[rng.IntN(len(runes))]
				if b.Len()+utf8.RuneLen(r) > size {
					break
				}
				b.WriteRune(r)
			}
		default: // any bytes: the hash must not care about encoding
			for range size {
				b.WriteByte(byte(rng.IntN(256)))
			}
		}
		keys = append(keys, b.String())
	}
	return keys
}

func TestPartitionForAgreesWithSaramaAndFranzGo(t *testing.T) {
	keys := randomKeys(100_000)
	multiByte, signBit := 0, 0
	for _, k := range keys {
		if utf8.ValidString(k) && utf8.RuneCountInString(k) < len(k) {
			multiByte++
		}
		if topology.Murmur2([]byte(k))&0x80000000 != 0 {
			signBit++
		}
	}
	if multiByte < 20_000 || signBit < 40_000 {
		t.Fatalf("key sample too narrow: %d multi-byte UTF-8 keys, %d with the sign bit set", multiByte, signBit)
	}

	sticky := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	// franz-go's default producer partitioner; keyed records take its hasher.
	uniform, ok := kgo.UniformBytesPartitioner(64<<10, true, true, nil).ForTopic("t").(kgo.TopicBackupPartitioner)
	if !ok {
		t.Fatal("franz-go's default partitioner is no longer a TopicBackupPartitioner")
	}
	saramaP := sarama.NewMurmur2Partitioner("t")

	for _, n := range []int32{1, 3, 6, 24, 100} {
		for _, k := range keys {
			want := topology.PartitionFor(k, n)
			if want < 0 || want >= n {
				t.Fatalf("PartitionFor(%q, %d) = %d is out of range", k, n, want)
			}
			got, err := saramaP.Partition(&sarama.ProducerMessage{Topic: "t", Key: sarama.StringEncoder(k)}, n)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("sarama NewMurmur2Partitioner puts %q on %d of %d, PartitionFor on %d", k, got, n, want)
			}
			r := &kgo.Record{Topic: "t", Key: []byte(k)}
			if got := sticky.Partition(r, int(n)); int32(got) != want {
				t.Fatalf("kgo StickyKeyPartitioner puts %q on %d of %d, PartitionFor on %d", k, got, n, want)
			}
			if got := uniform.PartitionByBackup(r, int(n), nil); int32(got) != want {
				t.Fatalf("kgo default partitioner puts %q on %d of %d, PartitionFor on %d", k, got, n, want)
			}
		}
	}

	// With n = 2^31 the modulo is the identity on a masked hash, so franz-go's
	// partitioner reveals its whole masked murmur2: compare the hash itself.
	for _, k := range keys {
		if got, want := sticky.Partition(&kgo.Record{Key: []byte(k)}, math.MaxInt32+1), topology.PositiveMurmur2([]byte(k)); uint32(got) != want {
			t.Fatalf("kgo masked murmur2(%q) = %d, PositiveMurmur2 = %d", k, got, want)
		}
	}
}

func TestSignBitKey(t *testing.T) {
	for _, key := range []string{"device-0", "пристрій-1"} {
		h := topology.Murmur2([]byte(key))
		if h&0x80000000 == 0 {
			t.Fatalf("murmur2(%q) = %#x: expected the sign bit set", key, h)
		}
		if got := topology.PositiveMurmur2([]byte(key)); got != h&0x7fffffff {
			t.Fatalf("PositiveMurmur2(%q) = %#x, want %#x", key, got, h&0x7fffffff)
		}
		sticky := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		saramaP := sarama.NewMurmur2Partitioner("t")
		for _, n := range []int32{3, 6, 24, 100} {
			want := topology.PartitionFor(key, n)
			got, _ := saramaP.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
			if got != want {
				t.Errorf("%q on %d partitions: sarama %d, PartitionFor %d", key, n, got, want)
			}
			if got := sticky.Partition(&kgo.Record{Key: []byte(key)}, int(n)); int32(got) != want {
				t.Errorf("%q on %d partitions: kgo %d, PartitionFor %d", key, n, got, want)
			}
		}
	}
	// The sign bit is where a careless port goes wrong: device-0 on 24 partitions.
	if got := topology.PartitionFor("device-0", 24); got != 10 {
		t.Fatalf("PartitionFor(device-0, 24) = %d, want 10", got)
	}
	if got := mathAbsPartition("device-0", 24); got == 10 {
		t.Fatalf("Math.abs-style gives %d for device-0 too; pick a key that tells them apart", got)
	}
}

func TestPartitionForNonPositive(t *testing.T) {
	for _, n := range []int32{0, -1, math.MinInt32} {
		if got := topology.PartitionFor("k", n); got != -1 {
			t.Errorf("PartitionFor(k, %d) = %d, want -1", n, got)
		}
	}
}

func TestMurmur2MatchesPartitionForFastPath(t *testing.T) {
	for _, k := range randomKeys(5_000) {
		if got, want := topology.PartitionFor(k, math.MaxInt32), int32(topology.PositiveMurmur2([]byte(k))%math.MaxInt32); got != want {
			t.Fatalf("string fast path and Murmur2 disagree on %q: %d vs %d", k, got, want)
		}
	}
}

// gokaPartition is the formula Goka's processor and view apply to a hasher
// (processor.go / view.go hash in goka v1.1.17): int32(Sum32()), negated if
// negative, modulo n. sarama's hash partitioner, which Goka's emitter uses,
// computes the same.
func gokaPartition(newHasher func() hash.Hash32, key string, n int32) int32 {
	h := newHasher()
	_, _ = h.Write([]byte(key))
	p := int32(h.Sum32())
	if p < 0 {
		p = -p
	}
	return p % n
}

// saramaCustomHashPartition is what Goka's emitter does: ProducerBuilder sets
// sarama.NewCustomHashPartitioner(hasher).
func saramaCustomHashPartition(t *testing.T, newHasher func() hash.Hash32, key string, n int32) int32 {
	t.Helper()
	p := sarama.NewCustomHashPartitioner(newHasher)("t")
	got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestGokaHasherAgreesWithPartitionFor(t *testing.T) {
	keys := append(randomKeys(20_000), "device-0", "пристрій-1", "user-1", "o-2", "o-5")
	for _, n := range []int32{1, 3, 6, 24, 100} {
		for _, k := range keys {
			want := topology.PartitionFor(k, n)
			if got := gokaPartition(topology.NewHasher, k, n); got != want {
				t.Fatalf("Goka with NewHasher puts %q on %d of %d, PartitionFor on %d", k, got, n, want)
			}
		}
	}
	for _, k := range keys[:2000] {
		if got, want := saramaCustomHashPartition(t, topology.NewHasher, k, 24), topology.PartitionFor(k, 24); got != want {
			t.Fatalf("Goka's emitter partitioner with NewHasher puts %q on %d, PartitionFor on %d", k, got, want)
		}
	}
}

// The test above would pass with any hasher that happens to agree; these show
// the alternatives do not, so swapping the hasher fails the suite.
func TestGokaDefaultHasherDisagrees(t *testing.T) {
	keys := randomKeys(20_000)
	for _, n := range []int32{6, 24} {
		differ := 0
		for _, k := range keys {
			if gokaPartition(goka.DefaultHasher(), k, n) != topology.PartitionFor(k, n) {
				differ++
			}
		}
		// A hash unrelated to murmur2 agrees by chance on 1/n of the keys.
		if share := float64(differ) / float64(len(keys)); share < 0.7 {
			t.Errorf("Goka's DefaultHasher (FNV-1a) disagrees with PartitionFor on only %.0f%% of keys over %d partitions", 100*share, n)
		} else {
			t.Logf("%d partitions: FNV-1a disagrees on %.1f%% of keys", n, 100*share)
		}
	}
	// The seed's real-broker observation: Goka's default put user-1 on 0 of 6, Java on 2.
	if got := gokaPartition(func() hash.Hash32 { return fnv.New32a() }, "user-1", 6); got != 0 {
		t.Errorf("FNV-1a puts user-1 on %d of 6, the seeds observed 0", got)
	}
	if got := gokaPartition(topology.NewHasher, "user-1", 6); got != 2 {
		t.Errorf("NewHasher puts user-1 on %d of 6, want 2", got)
	}
}

// unmaskedHasher is murmur2 without the mask: Goka then negates negative
// hashes (Math.abs), which disagrees with Kafka on keys with the sign bit set.
type unmaskedHasher struct{ buf []byte }

func (h *unmaskedHasher) Write(p []byte) (int, error) {
	h.buf = append(h.buf, p...)
	return len(p), nil
}
func (h *unmaskedHasher) Sum(b []byte) []byte { return b }
func (h *unmaskedHasher) Reset()              { h.buf = nil }
func (h *unmaskedHasher) Size() int           { return 4 }
func (h *unmaskedHasher) BlockSize() int      { return 4 }
func (h *unmaskedHasher) Sum32() uint32       { return topology.Murmur2(h.buf) }

func TestUnmaskedMurmur2HasherDisagrees(t *testing.T) {
	keys := randomKeys(20_000)
	differ := 0
	for _, k := range keys {
		if gokaPartition(func() hash.Hash32 { return &unmaskedHasher{} }, k, 24) != topology.PartitionFor(k, 24) {
			differ++
		}
	}
	share := float64(differ) / float64(len(keys))
	t.Logf("unmasked murmur2 through Goka's formula disagrees on %.1f%% of keys over 24 partitions", 100*share)
	if share < 0.3 {
		t.Fatalf("unmasked murmur2 disagrees on only %.1f%%; the masking test has lost its teeth", 100*share)
	}
}

func TestHasherIsAHash32(t *testing.T) {
	h := topology.NewHasher()
	if h.Size() != 4 || h.BlockSize() != 4 {
		t.Fatalf("Size/BlockSize = %d/%d", h.Size(), h.BlockSize())
	}
	_, _ = h.Write([]byte("пристрій"))
	_, _ = h.Write([]byte("-1")) // written in pieces: hashes the concatenation
	want := topology.PositiveMurmur2([]byte("пристрій-1"))
	if got := h.Sum32(); got != want {
		t.Fatalf("Sum32 after two writes = %#x, want %#x", got, want)
	}
	sum := h.Sum([]byte{0xff})
	if len(sum) != 5 || sum[0] != 0xff || uint32(sum[1])<<24|uint32(sum[2])<<16|uint32(sum[3])<<8|uint32(sum[4]) != want {
		t.Fatalf("Sum appends % x, want ff then big-endian %#x", sum, want)
	}
	if want&0x80000000 != 0 {
		t.Fatal("Sum32 must be masked")
	}
	h.Reset()
	_, _ = h.Write([]byte("user-1"))
	if got := h.Sum32(); got != topology.PositiveMurmur2([]byte("user-1")) {
		t.Fatalf("Sum32 after Reset = %#x, want hash of user-1 only", got)
	}
}

var sinkPartition int32
var sinkHash uint32

func BenchmarkPartitionFor(b *testing.B) {
	const key = "device-00042" // 12 bytes, a typical device id
	if len(key) != 12 {
		b.Fatal("want a 12-byte key")
	}
	b.ReportAllocs()
	for b.Loop() {
		sinkPartition = topology.PartitionFor(key, 24)
	}
}

func BenchmarkMurmur2(b *testing.B) {
	for _, size := range []int{12, 64, 255} {
		key := []byte(strings.Repeat("k", size))
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				sinkHash = topology.Murmur2(key)
			}
		})
	}
}

func BenchmarkGokaHasher(b *testing.B) {
	key := []byte("device-00042")
	b.ReportAllocs()
	for b.Loop() {
		h := topology.NewHasher()
		_, _ = h.Write(key)
		sinkHash = h.Sum32()
	}
}
