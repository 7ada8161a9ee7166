package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/topology"
)

func TestValidateKey(t *testing.T) {
	cases := []struct {
		name  string
		key   string
		limit int
		want  error // nil: accepted
	}{
		{"empty", "", 0, topology.ErrEmptyKey},
		{"invalid UTF-8", "dev\xff\xfe-1", 0, topology.ErrInvalidUTF8},
		{"truncated multi-byte rune", string([]byte("пристрій")[:3]), 0, topology.ErrInvalidUTF8},
		{"too long", strings.Repeat("k", 256), 0, topology.ErrKeyTooLong},
		{"exactly 255", strings.Repeat("k", 255), 0, nil},
		{"multi-byte", "пристрій-1/車両/🚗", 0, nil},
		{"multi-byte counted in bytes", strings.Repeat("ж", 128), 0, topology.ErrKeyTooLong}, // 256 bytes, 128 runes
		{"custom limit", "device-1", 4, topology.ErrKeyTooLong},
		{"custom limit exact", "dev1", 4, nil},
		{"non-positive limit means default", strings.Repeat("k", 255), -3, nil},
		{"whitespace is a key", " ", 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := topology.ValidateKey(c.key, c.limit)
			if c.want == nil {
				if err != nil {
					t.Fatalf("ValidateKey(%q) = %v, want nil", c.key, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("ValidateKey(%q) = %v, want errors.Is %v", c.key, err, c.want)
			}
			var ke *topology.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("ValidateKey(%q) = %T, want *topology.KeyError", c.key, err)
			}
			if ke.Key != c.key || ke.Err != c.want {
				t.Fatalf("KeyError = %+v, want Key %q Err %v", ke, c.key, c.want)
			}
			wantLimit := c.limit
			if wantLimit <= 0 {
				wantLimit = topology.MaxKeyBytes
			}
			if ke.Limit != wantLimit {
				t.Fatalf("KeyError.Limit = %d, want %d", ke.Limit, wantLimit)
			}
		})
	}
}

func TestKeyErrorMessages(t *testing.T) {
	err := topology.ValidateKey(strings.Repeat("k", 300), 0)
	var ke *topology.KeyError
	if !errors.As(err, &ke) {
		t.Fatal(err)
	}
	ke.Topic = "pings"
	for _, want := range []string{"pings", "too long", "300 bytes", "limit 255"} {
		if !strings.Contains(ke.Error(), want) {
			t.Errorf("%q does not mention %q", ke.Error(), want)
		}
	}
	err = topology.ValidateKey("", 0)
	if msg := err.Error(); !strings.Contains(msg, "empty") || !strings.Contains(msg, "per-key order") {
		t.Errorf("empty-key message %q should say the key is empty and what that costs", msg)
	}
	err = topology.ValidateKey("a\xffb", 0)
	if msg := err.Error(); !strings.Contains(msg, `"a\xffb"`) {
		t.Errorf("invalid UTF-8 message %q should quote the key", msg)
	}
	// Wrapped further up, the sentinel and the type still come through.
	wrapped := errors.Join(errors.New("emit"), err)
	if !errors.Is(wrapped, topology.ErrInvalidUTF8) || !errors.As(wrapped, &ke) {
		t.Errorf("wrapped %v lost its sentinel or type", wrapped)
	}
}
