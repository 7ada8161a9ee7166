package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

func TestFlagErrors(t *testing.T) {
	t.Setenv("FENCESTREAM_BROKERS", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no brokers"},
		{[]string{"--brokers", "127.0.0.1:1", "--partitions", "0"}, "--partitions"},
		{[]string{"--brokers", "127.0.0.1:1", "extra"}, "unexpected arguments"},
		{[]string{"--brokers", "127.0.0.1:1", "--log-level", "loud"}, "--log-level"},
		{[]string{"--brokers", "127.0.0.1:1", "--sasl-mechanism", "MD5"}, "SASL"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--brokers", "127.0.0.1:1", "--tiles", "https://tiles.example/{z}.png"}, "--tiles"},
		{[]string{"--brokers", "127.0.0.1:1", "--peers", "http://127.0.0.1:2"}, "--peers without"},
		{[]string{"--brokers", "127.0.0.1:1", "--shard", "0-11", "--replica", "0", "--replicas", "2"}, "not both"},
		{[]string{"--brokers", "127.0.0.1:1", "--shard", "0-11"}, "no replica holds partitions 12-23"},
		{[]string{"--brokers", "127.0.0.1:1", "--shard", "0-11", "--peers", "12-22=http://127.0.0.1:2"}, "partitions 23"},
		{[]string{"--brokers", "127.0.0.1:1", "--replica", "2", "--replicas", "2", "--peers", "http://a:1,http://b:2"}, "--replica"},
		{[]string{"--brokers", "127.0.0.1:1", "--replica", "0", "--replicas", "2", "--peers", "http://a:1"}, "one per replica"},
	} {
		var stderr embeddedtest.SyncBuffer
		err := run(context.Background(), c.args, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), c.want) {
			t.Errorf("run %q: %v (stderr %q), want an error mentioning %q", c.args, err, stderr.String(), c.want)
		}
	}
}

func TestRunServesAndShutsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	b := embeddedtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs embeddedtest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--brokers", strings.Join(b.Addrs(), ","), "--listen", "127.0.0.1:0", "--partitions", "4", "--log-format", "json", "--tiles", "https://tiles.example/{z}/{x}/{y}.png", "--subscription-writes"}, &logs)
	}()

	urlRE := regexp.MustCompile(`"url":"(http://127\.0\.0\.1:\d+/)"`)
	var base string
	deadline := time.Now().Add(60 * time.Second)
	for base == "" {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL logged within 60s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		resp, err := http.Get(base + "readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 60s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(base + "v1/partition?key=user-1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"partitions":4`) {
		t.Fatalf("--partitions not applied: %s", body)
	}
	if resp, err = http.Get(base + "v1/config"); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"tiles":"https://tiles.example/{z}/{x}/{y}.png"`) {
		t.Fatalf("--tiles did not reach the page: %s", body)
	}
	// --subscription-writes reaches the server: a PUT is written, not refused.
	req, err := http.NewRequest(http.MethodPut, base+"v1/subscriptions/hook-1", strings.NewReader(`{"url":"https://hooks.example/in","secret":"s"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT with --subscription-writes: %d %s", resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no graceful shutdown within 30s")
	}
}
