package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"
)

// The signature is HMAC-SHA256 of "<unix>.<body>" keyed by the secret, as
// a receiver in any language computes it; Verify refuses another body,
// another secret and an old timestamp.
func TestSignVerify(t *testing.T) {
	at := time.Unix(1796190000, 0)
	body := []byte(`{"trigger_id":"dev-1|f-1|ENTER|1"}`)
	m := hmac.New(sha256.New, []byte("k"))
	m.Write([]byte("1796190000." + string(body)))
	if got, want := Sign("k", at, body), "t=1796190000,v1="+hex.EncodeToString(m.Sum(nil)); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	h := Sign("k", at, body)
	if err := Verify("k", h, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for name, err := range map[string]error{
		"other body":   Verify("k", h, append(body, ' '), at, 0),
		"other secret": Verify("k2", h, body, at, 0),
		"too old":      Verify("k", h, body, at.Add(time.Hour), 5*time.Minute),
		"no header":    Verify("k", "", body, at, 0),
	} {
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}

func TestRetryAfterAndBackoff(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "-3": 0, "soon": 0, now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		"99999999": maxRetryAfter,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
	for n := uint32(1); n <= 40; n++ {
		d := backoff(n, time.Second, time.Minute, 0)
		hi := min(time.Second<<min(n-1, 20), time.Minute)
		if d < hi/2 || d > hi {
			t.Errorf("backoff(%d) = %s, want within [%s, %s]", n, d, hi/2, hi)
		}
	}
	if d := backoff(1, time.Second, time.Minute, 30*time.Second); d != 30*time.Second {
		t.Errorf("backoff under Retry-After 30 s = %s", d)
	}
}
