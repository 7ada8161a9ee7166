package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/debounce"
)

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--help"}, &out, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	if !strings.HasPrefix(out.String(), "Usage: debouncer --brokers HOST:PORT --state-dir DIR") {
		t.Errorf("usage line missing:\n%s", out.String())
	}
	for _, f := range []string{"brokers", "state-dir", "hot-standby", "recover-ahead", "partitions", "metrics-addr", "timer-interval", "max-clock-skew",
		"min-samples", "min-dwell", "hysteresis", "loiter", "silence-timeout", "log-level", "log-format", "sasl-mechanism", "tls"} {
		if !strings.Contains(out.String(), "-"+f) {
			t.Errorf("usage does not mention -%s:\n%s", f, out.String())
		}
	}
}

func TestFlagErrors(t *testing.T) {
	t.Setenv("FENCESTREAM_BROKERS", "")
	t.Setenv("FENCESTREAM_SASL_MECHANISM", "")
	ok := func(extra ...string) []string {
		// No metrics server: a flag error must come before anything listens.
		return append([]string{"--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--metrics-addr", ""}, extra...)
	}
	cases := []struct {
		args     []string
		want     string
		settings bool // wraps debounce.ErrInvalidSettings
	}{
		{[]string{"--brokers", "127.0.0.1:1"}, "--state-dir is required", false},
		{[]string{"--state-dir", t.TempDir()}, "no brokers given (set --brokers or FENCESTREAM_BROKERS)", false},
		{ok("--log-level", "loud"), `--log-level "loud"`, false},
		{ok("--log-format", "xml"), `--log-format "xml"`, false},
		{ok("--sasl-mechanism", "KERBEROS"), "unknown SASL mechanism", false},
		{ok("--sasl-mechanism", "PLAIN"), "SASL PLAIN needs a user", false},
		{ok("--min-samples", "0"), "MinSamples is 0, must be at least 1", true},
		{ok("--min-samples", "-3"), "MinSamples is -3", true},
		{ok("--hysteresis", "-5"), "Hysteresis is -5 m, must not be negative", true},
		{ok("--min-dwell", "-1s"), "MinDwell is -1s, must not be negative", true},
		{ok("--silence-timeout", "0s"), "SilenceTimeout is 0, must be positive", true},
		{ok("--loiter", "-1m"), "Loiter is -1m0s", true},
		{ok("--min-samples", "three"), `invalid value "three" for flag -min-samples`, false},
		{[]string{"--no-such-flag"}, "flag provided but not defined", false},
		// A module flag is checked with, not after, --brokers and --state-dir.
		{[]string{"--min-samples", "0"}, "MinSamples is 0, must be at least 1", true},
		{[]string{"--max-accuracy-m", "0"}, "--max-accuracy-m must be positive", false},
	}
	for _, c := range cases {
		err := run(context.Background(), c.args, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
			continue
		}
		if got := errors.Is(err, debounce.ErrInvalidSettings); got != c.settings {
			t.Errorf("%v: errors.Is(err, ErrInvalidSettings) = %v, want %v (%v)", c.args, got, c.settings, err)
		}
	}
}
