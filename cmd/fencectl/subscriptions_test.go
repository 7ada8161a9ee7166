package main

import (
	"strings"
	"testing"
)

// subscriptions add, list, disable and rm round-trip through the compacted
// subscriptions topic; list never shows a secret; a bad subscription is a
// usage error naming every problem, and nothing is written.
func TestSubscriptions(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	addr := withTopology(t, 3)
	code, out, errs := fencectl(t, "subscriptions", "add", "hooks-a", "--url", "https://example.test/hook", "--secret", "top-secret",
		"--fence", "depot,yard", "--type", "enter", "--type", "exit", "--tag", "loading,north", "--group", "fleet-a", "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	code, out, errs = fencectl(t, "subscriptions", "add", "hooks-b", "--url", "http://127.0.0.1:9/x", "--secret", "s", "--brokers", addr)
	wantCode(t, code, 0, out, errs)

	code, out, errs = fencectl(t, "subscriptions", "add", "bad", "--url", "ftp://x", "--type", "teleport", "--brokers", addr)
	wantCode(t, code, exitUsage, out, errs)
	code, out, errs = fencectl(t, "subscriptions", "add", "bad", "--url", "ftp://x", "--brokers", addr)
	wantCode(t, code, exitUsage, out, errs)
	for _, w := range []string{"url must be an http:// or https:// URL", "secret is required"} {
		if !strings.Contains(errs, w) {
			t.Errorf("bad subscription: stderr lacks %q:\n%s", w, errs)
		}
	}

	code, out, errs = fencectl(t, "subscriptions", "list", "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	for _, w := range []string{"hooks-a", "true", "https://example.test/hook", "depot,yard", "loading,north", "fleet-a", "enter,exit", "hooks-b", "2 subscriptions"} {
		if !strings.Contains(out, w) {
			t.Errorf("list lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "top-secret") || strings.Contains(out, "bad") {
		t.Errorf("list shows a secret or a refused subscription:\n%s", out)
	}

	code, out, errs = fencectl(t, "subscriptions", "disable", "hooks-a", "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	code, out, errs = fencectl(t, "subscriptions", "rm", "hooks-b", "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	code, out, errs = fencectl(t, "subscriptions", "rm", "nope", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	code, out, errs = fencectl(t, "subscriptions", "list", "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	if !strings.Contains(out, "hooks-a") || !strings.Contains(out, "false") || !strings.Contains(out, "disabled by fencectl") ||
		strings.Contains(out, "hooks-b") || !strings.Contains(out, "1 subscriptions") {
		t.Errorf("after disable and rm:\n%s", out)
	}
}
