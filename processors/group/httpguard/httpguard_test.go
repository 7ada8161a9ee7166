package httpguard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve runs Serve on a 127.0.0.1 listener and returns its address and the
// limit listener (to read how many connections it holds).
func serve(t *testing.T, h http.Handler, opts ...Opt) (string, *limitListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, ll, err := newServer(ctx, l, h, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ll) }()
	t.Cleanup(func() {
		cancel()
		_ = srv.Close()
		<-done
	})
	return l.Addr().String(), ll
}

// conn is a raw client connection, to keep it open and idle at will.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c: c, r: bufio.NewReader(c)}
}

// get sends one keep-alive request and reads the answer.
func (c *conn) get(path, host string) (*http.Response, string, error) {
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c.c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready\n") })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// More idle connections than the cap — keep-alives that made a request and
// connections that never sent one — do not keep /readyz from answering, and
// the server never holds more than the cap (issue 17: 19,500 idle keep-alives
// took fenceview to 18,996 of 20,000 fds and /readyz stopped answering).
func TestIdleConnectionsAboveTheCapDoNotStarveReadyz(t *testing.T) {
	const max = 8
	addr, ll := serve(t, okHandler(), MaxConns(max))
	var idle []*conn
	for i := 0; i < 3*max; i++ {
		c := dial(t, addr)
		if i%2 == 0 { // a keep-alive that made one request, then idles
			if resp, _, err := c.get("/readyz", addr); err != nil || resp.StatusCode != 200 {
				t.Fatalf("idle conn %d: %v %v", i, resp, err)
			}
		}
		idle = append(idle, c)
		waitFor(t, "the server to hold the connection", func() bool { return ll.open() >= min(i+1, max) })
		if n := ll.open(); n > max {
			t.Fatalf("%d connections held, cap %d", n, max)
		}
	}
	for i := 0; i < 5; i++ {
		resp, body, err := dial(t, addr).get("/readyz", addr)
		if err != nil || resp.StatusCode != 200 || body != "ready\n" {
			t.Fatalf("/readyz with %d idle connections open: %v %q %v", len(idle), resp, body, err)
		}
	}
	if n := ll.open(); n > max {
		t.Fatalf("%d connections held, cap %d", n, max)
	}
	// The evicted ones were closed by the server: the oldest idle one reads EOF.
	_ = idle[0].c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle[0].r.ReadByte(); err != io.EOF {
		t.Fatalf("oldest idle connection: read %v, want EOF (closed to make room)", err)
	}
}

// When every connection is busy with a request, a new one is answered 503 at
// once rather than queued.
func TestBusyConnectionsAtTheCapAnswer503(t *testing.T) {
	const max = 4
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(max)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered.Done()
			<-release
		}
		io.WriteString(w, "ok\n")
	})
	addr, _ := serve(t, h, MaxConns(max))
	var wg sync.WaitGroup
	for i := 0; i < max; i++ {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, _, err := c.get("/slow", addr); err != nil || resp.StatusCode != 200 {
				t.Errorf("slow request: %v %v", resp, err)
			}
		}()
	}
	entered.Wait()
	resp, body, err := dial(t, addr).get("/readyz", addr)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many connections: all 4 are busy") {
		t.Fatalf("above the cap with every connection busy: %v %q %v, want 503 with Retry-After", resp, body, err)
	}
	close(release)
	wg.Wait()
	// Room again once the slow requests are done: their connections are idle.
	if resp, _, err := dial(t, addr).get("/readyz", addr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the slow requests: %v %v", resp, err)
	}
}

// A request naming a host that is not allowed gets 421 and a message saying
// how to allow it; IP literals and localhost names are allowed by default
// (issue 17: any Host was accepted, so a DNS-rebinding page could read device
// positions from the loopback API).
func TestHostAllowList(t *testing.T) {
	addr, _ := serve(t, okHandler())
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]int{
		addr:                     200,
		"localhost:" + port:      200,
		"LOCALHOST.:" + port:     200,
		"app.localhost":          200,
		"[::1]:" + port:          200,
		"10.1.2.3":               200,
		"evil.example:" + port:   421,
		"localhost.evil.example": 421,
		"127.0.0.1.nip.io":       421,
	} {
		resp, body, err := dial(t, addr).get("/readyz", host)
		if err != nil {
			t.Fatalf("Host %q: %v", host, err)
		}
		if resp.StatusCode != want {
			t.Errorf("Host %q: status %d, want %d (%s)", host, resp.StatusCode, want, body)
		}
		if want == 421 && !strings.Contains(body, "--allowed-hosts") {
			t.Errorf("Host %q: message %q does not say how to allow it", host, body)
		}
	}
	addr, _ = serve(t, okHandler(), AllowedHosts([]string{"fenceview", "*.example.com"}))
	for host, want := range map[string]int{"fenceview:8080": 200, "a.example.com": 200, "example.com": 200, "localhost": 421, "127.0.0.1": 200} {
		if resp, _, err := dial(t, addr).get("/", host); err != nil || resp.StatusCode != want {
			t.Errorf("allowed fenceview,*.example.com; Host %q: %v %v, want %d", host, resp, err, want)
		}
	}
	addr, _ = serve(t, okHandler(), AnyHost())
	if resp, _, err := dial(t, addr).get("/", "evil.example"); err != nil || resp.StatusCode != 200 {
		t.Errorf("AnyHost: %v %v", resp, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []Opt{MaxConns(0), Timeouts(0, time.Second, time.Second, time.Second), AllowedHosts([]string{"http://x/"})} {
		if _, _, err := newServer(context.Background(), l, okHandler(), []Opt{o}); err == nil {
			t.Error("bad option accepted")
		}
	}
	l.Close()
}
