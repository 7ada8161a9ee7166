package topology

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxKeyBytes is the default key size limit: keys are routing addresses, not payloads.
const MaxKeyBytes = 255

// Sentinels for the ways a key can be unusable; KeyError wraps one of them.
var (
	ErrEmptyKey    = errors.New("key is empty")
	ErrInvalidUTF8 = errors.New("key is not valid UTF-8")
	ErrKeyTooLong  = errors.New("key is too long")
)

// KeyError says which key was refused and why. errors.Is matches its sentinel.
type KeyError struct {
	Topic string
	Key   string
	Limit int
	Err   error
}

func (e *KeyError) Error() string {
	where := ""
	if e.Topic != "" {
		where = " for topic " + e.Topic
	}
	switch {
	case errors.Is(e.Err, ErrKeyTooLong):
		return fmt.Sprintf("key%s refused: %v (%d bytes, limit %d)", where, e.Err, len(e.Key), e.Limit)
	case errors.Is(e.Err, ErrInvalidUTF8):
		return fmt.Sprintf("key%s refused: %v (%q)", where, e.Err, KeyExcerpt(e.Key))
	default:
		return fmt.Sprintf("key%s refused: %v: a record without a key is spread round-robin and loses per-key order", where, e.Err)
	}
}

func (e *KeyError) Unwrap() error { return e.Err }

// ValidateKey applies the key rules of every fencestream producer and consumer:
// non-empty, valid UTF-8, at most limit bytes (MaxKeyBytes when limit <= 0).
func ValidateKey(key string, limit int) error {
	if limit <= 0 {
		limit = MaxKeyBytes
	}
	var err error
	switch {
	case key == "":
		err = ErrEmptyKey
	case !utf8.ValidString(key):
		err = ErrInvalidUTF8
	case len(key) > limit:
		err = ErrKeyTooLong
	default:
		return nil
	}
	return &KeyError{Key: key, Limit: limit, Err: err}
}
