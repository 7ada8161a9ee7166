package boundedlog_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/group/boundedlog"
)

// TestBoundedLoggerCutsEveryAttribute: a megabyte in a message, a string, an
// error (as Goka's "could not commit message with key '…'"), a With
// attribute and a group's attribute each come out cut to LogValueLimit with
// the full length; short ones are untouched.
func TestBoundedLoggerCutsEveryAttribute(t *testing.T) {
	huge := strings.Repeat("k", 1<<20)
	var buf bytes.Buffer
	log := boundedlog.New(slog.New(slog.NewTextHandler(&buf, nil))).With("key", huge)
	err := errors.New("could not commit message with key '" + huge + "'")
	log.Info(huge, "s", huge, "err", err,
		slog.Group("g", slog.String("v", huge)), "short", "veh-1")
	out := buf.String()
	if len(out) > 6*boundedlog.ValueLimit {
		t.Fatalf("log line of %d bytes", len(out))
	}
	if n := strings.Count(out, "…[1048576 bytes]"); n != 4 { // message, key, s, g.v
		t.Errorf("%d markers of the full length, want 4", n)
	}
	if !strings.Contains(out, "…["+strconv.Itoa(len(err.Error()))+" bytes]") || !strings.Contains(out, "short=veh-1") {
		t.Errorf("error not cut with its length, or a short attribute changed: %.500s", out)
	}
	if boundedlog.New(log) != log {
		t.Error("New wrapped a bounded logger again")
	}
}
