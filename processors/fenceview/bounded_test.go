package fenceview_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/group/httpguard"
)

// serveBounded serves f's handler through fenceview.Serve with opts and
// returns its base URL.
func serveBounded(t *testing.T, f *fixture, opts ...httpguard.Opt) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fenceview.Serve(ctx, l, f.srv.Config.Handler, time.Second, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + l.Addr().String()
}

// fenceview's server holds at most its connection cap: with more idle
// connections open than the cap, /readyz still answers (issue 17: 19,500 idle
// keep-alives exhausted the process's descriptors and /readyz stopped
// answering).
func TestServeIdleConnectionsDoNotStarveReadyz(t *testing.T) {
	f := newFixture(t)
	f.ready.notReady.Store(false)
	base := serveBounded(t, f, httpguard.MaxConns(4))
	addr := strings.TrimPrefix(base, "http://")
	for i := 0; i < 12; i++ { // connections that never send a request
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// Keep-alive connections left idle in their own transports.
	for i := 0; i < 12; i++ {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(base + "/healthz")
		if err != nil {
			t.Fatalf("keep-alive %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := 0; i < 3; i++ {
		tr := &http.Transport{DisableKeepAlives: true}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz with 24 idle connections and a cap of 4: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz: %d", resp.StatusCode)
		}
	}
}

// The API answers only the hosts it is allowed to: a DNS-rebinding page's
// name gets 421 (issue 17: any Host was accepted).
func TestServeRefusesForeignHosts(t *testing.T) {
	f := newFixture(t)
	f.ready.notReady.Store(false)
	base := serveBounded(t, f)
	for host, want := range map[string]int{"": http.StatusOK, "localhost:8080": http.StatusOK, "attacker.example": http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/fences", nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, resp.StatusCode, body, want)
		}
	}
}

// A trigger stream outlives the server's write timeout, and streams beyond
// the cap are answered 503.
func TestTriggerStreamsExemptFromWriteTimeoutAndCapped(t *testing.T) {
	f := newFixture(t, fenceview.Heartbeat(50*time.Millisecond), fenceview.MaxStreams(1))
	f.ready.notReady.Store(false)
	const write = 200 * time.Millisecond
	base := serveBounded(t, f, httpguard.Timeouts(time.Second, write, write, time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := openStream(t, ctx, base+"/v1/triggers/stream")
	start := time.Now()
	for beats := 0; time.Since(start) < 3*write || beats < 2; {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended after %v (write timeout %v)", time.Since(start), write)
			}
			beats += len(ev.comments)
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat within 10s")
		}
	}
	resp, err := http.Get(base + "/v1/triggers/stream")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many trigger streams open (the cap is 1)") {
		t.Fatalf("second stream: %d %s", resp.StatusCode, body)
	}
}
