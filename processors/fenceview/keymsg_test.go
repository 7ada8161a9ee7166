package fenceview_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRefusedKeyMessages: a refused id names what it is once ("key key
// refused" was the answer to /v1/partition?key=).
func TestRefusedKeyMessages(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/v1/partition?key=":                     "partition key refused: key is empty",
		"/v1/partition?key=%ff":                  "partition key refused: key is not valid UTF-8",
		"/v1/fences/" + strings.Repeat("x", 256): "fence id key refused: key is too long (256 bytes, limit 255)",
		"/v1/devices/%C0%AF":                     "device id key refused: key is not valid UTF-8",
	} {
		e := f.wantStatus(t, path, http.StatusBadRequest)
		if !strings.HasPrefix(e.Error, want) || strings.Contains(e.Error, "key key") {
			t.Errorf("GET %s: error %q, want it to start %q", path, e.Error, want)
		}
	}
}
