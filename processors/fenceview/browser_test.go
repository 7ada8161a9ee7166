package fenceview_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
)

const chromiumPath = "/usr/bin/chromium"

// TestBrowserPage loads the page in real headless Chromium against a
// running server with fake sources, driving it over the DevTools protocol:
// fences render with the right counts and colours, counts follow the
// sources without a reload, a published trigger appears in the live list,
// and clicking a fence lists who is inside. It saves a screenshot to
// $FENCESTREAM_ARTIFACTS (default: a temporary directory).
func TestBrowserPage(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Debian's chromium at %s (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := startChromium(t, ctx)
	page := b.newPage(t, ctx)
	page.call(t, ctx, "Runtime.enable", nil, nil)
	page.call(t, ctx, "Page.enable", nil, nil)
	page.call(t, ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": false}, nil)
	// A trigger from before the page opened: the live list starts with it.
	early := trigger("dev-0|station-zoo|ENTER|1", "dev-0", "station-zoo")
	f.feed.Publish(early)
	page.call(t, ctx, "Page.navigate", map[string]any{"url": f.srv.URL + "/"}, nil)

	// Every fence of the catalogue is drawn, with its count.
	want := map[string]string{}
	for _, fe := range fences.Demo() {
		want[fe.ID] = "0"
	}
	want["park-tiergarten"], want["station-zoo"], want["airport-ber"] = "3", "5", "1"
	type mapState struct {
		Loaded, Stream string
		Counts         map[string]string
		Labels         map[string]string
		Fills          map[string]string
		Shapes         map[string]string
	}
	const readMap = `JSON.stringify((() => {
		const gs = [...document.querySelectorAll('#map [data-fence-id]')];
		const by = (fn) => Object.fromEntries(gs.map((g) => [g.dataset.fenceId, fn(g)]));
		return {
			loaded: document.body.dataset.loaded, stream: document.body.dataset.stream,
			counts: by((g) => g.dataset.count),
			labels: by((g) => g.querySelector('text').textContent),
			fills: by((g) => getComputedStyle(g.querySelector('.shape')).fill),
			shapes: by((g) => g.querySelector('.shape').tagName + (g.querySelector('.shape').getAttribute('fill-rule') || '')),
		};
	})())`
	var st mapState
	page.until(t, ctx, "fences rendered with their counts and the stream open", readMap, &st, func() bool {
		if st.Loaded != "true" || st.Stream != "open" || len(st.Counts) != len(want) {
			return false
		}
		for id, c := range want {
			if st.Counts[id] != c || st.Labels[id] != c {
				return false
			}
		}
		return true
	})
	for id, c := range want {
		white := st.Fills[id] == "rgb(255, 255, 255)"
		if (c == "0") != white {
			t.Errorf("%s: count %s but fill %s", id, c, st.Fills[id])
		}
	}
	if st.Fills["station-zoo"] != "rgb(211, 47, 47)" { // the busiest fence is the scale's red
		t.Errorf("busiest fence fill %s", st.Fills["station-zoo"])
	}
	if st.Shapes["station-zoo"] != "circle" || st.Shapes["park-tiergarten"] != "pathevenodd" {
		t.Errorf("shapes: circle fence drawn as %q, polygon as %q", st.Shapes["station-zoo"], st.Shapes["park-tiergarten"])
	}

	// Nothing below reloads the page: a marker set now must survive.
	page.eval(t, ctx, `window.__noReload = 42; "ok"`, nil)

	// Counts follow the sources (the page polls).
	f.occ.put(&geofencepb.Occupancy{FenceId: "airport-ber", Count: 7, Devices: []string{"a1"}})
	page.until(t, ctx, "the new count of airport-ber", readMap, &st, func() bool { return st.Counts["airport-ber"] == "7" && st.Labels["airport-ber"] == "7" })

	// A trigger published now appears in the live list.
	tr := trigger("dev-9|park-tiergarten|ENTER|123", "dev-9", "park-tiergarten")
	f.feed.Publish(tr)
	var items []struct{ ID, Text, Fence string }
	page.until(t, ctx, "the trigger in the live list, above the one from before", `JSON.stringify([...document.querySelectorAll('#triggers [data-trigger-id]')].map((li) => ({id: li.dataset.triggerId, text: li.textContent, fence: li.dataset.fenceId})))`, &items, func() bool {
		return len(items) == 2 && items[0].ID == tr.TriggerId && items[1].ID == early.TriggerId
	})
	if !strings.Contains(items[0].Text, "ENTER") || !strings.Contains(items[0].Text, "dev-9") || items[0].Fence != "park-tiergarten" {
		t.Errorf("trigger item %+v", items[0])
	}

	// Clicking a fence shows who is inside.
	page.eval(t, ctx, `document.querySelector('#map [data-fence-id="park-tiergarten"]').dispatchEvent(new MouseEvent('click', {bubbles: true})); "ok"`, nil)
	var inside []string
	page.until(t, ctx, "the devices inside park-tiergarten", `JSON.stringify([...document.querySelectorAll('#details [data-device-id]')].map((li) => li.dataset.deviceId))`, &inside, func() bool {
		return strings.Join(inside, ",") == "d1,d2,d3"
	})
	var marker int
	page.eval(t, ctx, `window.__noReload`, &marker)
	if marker != 42 {
		t.Fatal("the page reloaded")
	}

	var shot struct{ Data string }
	page.call(t, ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	dir := os.Getenv("FENCESTREAM_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fenceview.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	if ex := b.exceptions(); len(ex) > 0 {
		t.Errorf("the page threw: %v", ex)
	}
}

// browser is a headless Chromium driven over one DevTools websocket
// (flattened sessions).
type browser struct {
	ws      *websocket.Conn
	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	thrown  []string
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func startChromium(t *testing.T, ctx context.Context) *browser {
	t.Helper()
	profile := t.TempDir()
	cmd := exec.Command(chromiumPath,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+profile, "--remote-debugging-port=0",
		"--remote-allow-origins=*", // golang.org/x/net/websocket always sends an Origin
		"about:blank")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // only the process this test started
		<-exited
	})
	// Chromium writes the port it chose to DevToolsActivePort.
	var wsURL string
	deadline := time.Now().Add(60 * time.Second)
	for wsURL == "" {
		if data, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort")); err == nil {
			if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) == 2 {
				wsURL = "ws://127.0.0.1:" + lines[0] + lines[1]
			}
		}
		select {
		case <-exited:
			t.Fatalf("chromium exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromium gave no DevTools port within 60s: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ws, err := websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatalf("DevTools websocket %s: %v", wsURL, err)
	}
	ws.MaxPayloadBytes = 64 << 20
	t.Cleanup(func() { ws.Close() })
	b := &browser{ws: ws, pending: map[int]chan cdpMessage{}}
	go b.read()
	return b
}

func (b *browser) read() {
	for {
		var raw []byte
		if err := websocket.Message.Receive(b.ws, &raw); err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.pending = nil
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else if m.Method == "Runtime.exceptionThrown" {
			b.thrown = append(b.thrown, string(m.Params))
		}
		b.mu.Unlock()
	}
}

func (b *browser) exceptions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.thrown...)
}

// call sends one command and decodes its result into out (when non-nil).
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.pending == nil {
		b.mu.Unlock()
		return fmt.Errorf("%s: DevTools connection closed", method)
	}
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	if err := websocket.JSON.Send(b.ws, msg); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: DevTools connection closed", method)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

type page struct {
	b       *browser
	session string
}

func (b *browser) newPage(t *testing.T, ctx context.Context) *page {
	t.Helper()
	var target struct{ TargetID string }
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatal(err)
	}
	var att struct{ SessionID string }
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		t.Fatal(err)
	}
	return &page{b: b, session: att.SessionID}
}

func (p *page) call(t *testing.T, ctx context.Context, method string, params, out any) {
	t.Helper()
	if err := p.b.call(ctx, p.session, method, params, out); err != nil {
		t.Fatal(err)
	}
}

// evalErr evaluates expr in the page; a string result is decoded as JSON
// into out, anything else directly.
func (p *page) evalErr(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Type  string
			Value json.RawMessage
		}
		ExceptionDetails *struct{ Text string }
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res); err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("evaluating %q: %s", expr, res.ExceptionDetails.Text)
	}
	if out == nil {
		return nil
	}
	if res.Result.Type == "string" {
		var s string
		if err := json.Unmarshal(res.Result.Value, &s); err != nil {
			return err
		}
		return json.Unmarshal([]byte(s), out)
	}
	return json.Unmarshal(res.Result.Value, out)
}

func (p *page) eval(t *testing.T, ctx context.Context, expr string, out any) {
	t.Helper()
	if err := p.evalErr(ctx, expr, out); err != nil {
		t.Fatal(err)
	}
}

// until re-evaluates expr into out until done holds, for at most 60s.
func (p *page) until(t *testing.T, ctx context.Context, what, expr string, out any, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var lastErr error
	for {
		lastErr = p.evalErr(ctx, expr, out)
		if lastErr == nil && done() {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s (last error %v, last state %+v)", what, lastErr, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
