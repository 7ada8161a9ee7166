package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
)

// A request signed as the processor signs it is printed and accepted; one
// signed with another secret, or too long ago, is refused.
func TestHandler(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body, err := delivery.Body("demo", &geofencepb.Trigger{TriggerId: "dev-1|f-1|ENTER|1", DeviceId: "dev-1", FenceId: "f-1",
		Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, secret string
		signedAt     time.Time
		want         int
		says         string
	}{
		{"signed", "s3cret", now, http.StatusNoContent, "signature: ok"},
		{"other secret", "other", now, http.StatusUnauthorized, "signature: REFUSED"},
		{"replayed", "s3cret", now.Add(-time.Hour), http.StatusUnauthorized, "signature: REFUSED"},
	} {
		var out strings.Builder
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(body)))
		req.Header.Set(delivery.HeaderSignature, delivery.Sign(c.secret, c.signedAt, body))
		req.Header.Set(delivery.HeaderIdempotencyKey, "dev-1|f-1|ENTER|1")
		rec := httptest.NewRecorder()
		handler("s3cret", &out, func() time.Time { return now }).ServeHTTP(rec, req)
		if rec.Code != c.want || !strings.Contains(out.String(), c.says) || !strings.Contains(out.String(), `"trigger_id":"dev-1|f-1|ENTER|1"`) {
			t.Errorf("%s: answered %d, want %d; printed:\n%s", c.name, rec.Code, c.want, out.String())
		}
	}
}
