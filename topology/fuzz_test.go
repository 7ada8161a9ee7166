package topology_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencestream/fencestream/topology"
)

// FuzzValidateKey: an accepted key is non-empty valid UTF-8 of at most the
// limit in bytes; a refused one is a *KeyError naming the key, the limit and
// the one rule it breaks; PartitionFor is in range and agrees with Goka's
// hasher and with the exported murmur2.
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{
		"veh-0004", "", " ", "dev\xff\xfe-1", "пристрій-1/車両/🚗", "zone-mitte-core",
		strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("ж", 128), "\x00", "\ufffd", "a\xc0\x80",
	} {
		f.Add(k, 0, int32(24))
		f.Add(k, 4, int32(1))
	}
	f.Add("user-1", -3, int32(-1))
	f.Add("user-1", 1<<40, int32(2147483647))
	f.Fuzz(func(t *testing.T, key string, limit int, partitions int32) {
		err := topology.ValidateKey(key, limit)
		effective := limit
		if effective <= 0 {
			effective = topology.MaxKeyBytes
		}
		if err == nil {
			if key == "" || !utf8.ValidString(key) || len(key) > effective {
				t.Fatalf("ValidateKey(%q, %d) accepted a %d-byte key", key, limit, len(key))
			}
		} else {
			var ke *topology.KeyError
			if !errors.As(err, &ke) || ke.Key != key || ke.Limit != effective {
				t.Fatalf("ValidateKey(%q, %d) = %#v, want a *KeyError with the key and limit %d", key, limit, err, effective)
			}
			var want error
			switch {
			case key == "":
				want = topology.ErrEmptyKey
			case !utf8.ValidString(key):
				want = topology.ErrInvalidUTF8
			default:
				want = topology.ErrKeyTooLong
			}
			if !errors.Is(err, want) {
				t.Fatalf("ValidateKey(%q, %d) = %v, want %v", key, limit, err, want)
			}
			if msg := err.Error(); !utf8.ValidString(msg) {
				t.Fatalf("message %q is not valid UTF-8 (it goes into logs and HTTP answers)", msg)
			}
		}

		p := topology.PartitionFor(key, partitions)
		if partitions <= 0 {
			if p != -1 {
				t.Fatalf("PartitionFor(%q, %d) = %d, want -1", key, partitions, p)
			}
			return
		}
		if p < 0 || p >= partitions {
			t.Fatalf("PartitionFor(%q, %d) = %d, out of range", key, partitions, p)
		}
		if want := int32(topology.PositiveMurmur2([]byte(key)) % uint32(partitions)); p != want {
			t.Fatalf("PartitionFor(%q, %d) = %d, PositiveMurmur2 says %d", key, partitions, p, want)
		}
		// Goka's rule over the hasher: int32(Sum32()) % n, negated if negative.
		h := topology.NewHasher()
		h.Write([]byte(key))
		g := int32(h.Sum32()) % partitions
		if g < 0 {
			g = -g
		}
		if g != p {
			t.Fatalf("Goka would put %q on partition %d of %d, PartitionFor says %d", key, g, partitions, p)
		}
	})
}
