package fenceview_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
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
	"github.com/fencestream/fencestream/processors/fenceview"
)

const chromiumPath = "/usr/bin/chromium"

// TestBrowserPage loads the page in real headless Chromium against a
// running server with fake sources, driving it over the DevTools protocol:
// the Leaflet map renders every fence with the right counts and colours,
// labels never overlap and hide at low zoom, counts follow the sources
// without a reload, the recent and a published trigger appear in the list,
// and clicking a fence shows its effective settings, who is inside and its
// recent triggers. It runs with no basemap (--tiles none), with a tile
// server that answers, and with one that cannot be reached (the page must
// work the same). It saves screenshots to $FENCESTREAM_ARTIFACTS (default:
// a temporary directory).
func TestBrowserPage(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Debian's chromium at %s (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := startChromium(t, ctx)

	t.Run("tiles=none", func(t *testing.T) {
		f := newFixture(t)
		page := openPage(t, ctx, b, f)
		checkPage(t, ctx, f, page, b, "none")
		screenshot(t, ctx, page, "fenceview.png")
	})
	t.Run("tiles=local", func(t *testing.T) {
		tiles := tileServer(t)
		f := newFixture(t, fenceview.Map(fenceview.MapConfig{Tiles: tiles.URL + "/{z}/{x}/{y}.png", Attribution: "test tiles"}))
		page := openPage(t, ctx, b, f)
		var loaded int
		page.until(t, ctx, "basemap tiles loaded", `document.querySelectorAll('.leaflet-tile-loaded').length`, &loaded, func() bool { return loaded > 0 })
		var attribution string
		page.eval(t, ctx, `JSON.stringify(document.querySelector('.leaflet-control-attribution').textContent)`, &attribution)
		if !strings.Contains(attribution, "test tiles") {
			t.Errorf("attribution %q lacks the tile provider's", attribution)
		}
		checkPage(t, ctx, f, page, b, "on")
		screenshot(t, ctx, page, "fenceview-tiles.png")
	})
	t.Run("tiles=unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + l.Addr().String()
		l.Close() // nothing listens there now: every tile fails
		f := newFixture(t, fenceview.Map(fenceview.MapConfig{Tiles: dead + "/{z}/{x}/{y}.png"}))
		page := openPage(t, ctx, b, f)
		var errs string
		page.until(t, ctx, "tile errors", `JSON.stringify(document.body.dataset.tileErrors || "0")`, &errs, func() bool { return errs != "0" })
		checkPage(t, ctx, f, page, b, "on")
	})
}

// tileServer serves one grey 256×256 PNG for every tile.
func tileServer(t *testing.T) *httptest.Server {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 256, 256))
	for i := range img.Pix {
		img.Pix[i] = 0xd8
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(buf.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func openPage(t *testing.T, ctx context.Context, b *browser, f *fixture) *page {
	t.Helper()
	page := b.newPage(t, ctx)
	// Before the fixture's server closes (cleanups run last first): an open
	// page holds a trigger stream, which would keep the server's Close waiting.
	t.Cleanup(func() { _ = b.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": page.target}, nil) })
	page.call(t, ctx, "Runtime.enable", nil, nil)
	page.call(t, ctx, "Page.enable", nil, nil)
	page.call(t, ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": false}, nil)
	// A trigger from before the page opened: the list starts with it.
	f.feed.Publish(trigger("dev-0|station-zoo|ENTER|1", "dev-0", "station-zoo"))
	page.call(t, ctx, "Page.navigate", map[string]any{"url": f.srv.URL + "/"}, nil)
	return page
}

func checkPage(t *testing.T, ctx context.Context, f *fixture, page *page, b *browser, tiles string) {
	t.Helper()
	// Every fence of the catalogue is drawn, with its count.
	want := map[string]string{}
	for _, fe := range fences.Demo() {
		want[fe.ID] = "0"
	}
	want["park-tiergarten"], want["station-zoo"], want["airport-ber"] = "3", "5", "1"
	type mapState struct {
		Loaded, Stream, Tiles string
		Counts                map[string]string
		Labels                map[string]string
		Fills                 map[string]string
		Rules                 map[string]string
		Arcs                  map[string]bool
		Onscreen              int
	}
	const readMap = `JSON.stringify((() => {
		const paths = [...document.querySelectorAll('#map path[data-fence-id]')];
		const labels = [...document.querySelectorAll('#map .count-label[data-fence-id]')];
		const by = (els, fn) => Object.fromEntries(els.map((e) => [e.dataset.fenceId, fn(e)]));
		const m = document.getElementById('map').getBoundingClientRect();
		return {
			loaded: document.body.dataset.loaded, stream: document.body.dataset.stream, tiles: document.body.dataset.tiles,
			counts: by(paths, (p) => p.dataset.count),
			labels: by(labels, (l) => l.textContent),
			fills: by(paths, (p) => getComputedStyle(p).fill),
			rules: by(paths, (p) => p.getAttribute('fill-rule')),
			arcs: by(paths, (p) => /a/.test(p.getAttribute('d'))),
			onscreen: paths.filter((p) => { const r = p.getBoundingClientRect(); return r.right > m.left && r.left < m.right && r.bottom > m.top && r.top < m.bottom; }).length,
		};
	})())`
	var st mapState
	page.until(t, ctx, "fences rendered on the map with their counts and the stream open", readMap, &st, func() bool {
		if st.Loaded != "true" || st.Stream != "open" || len(st.Counts) != len(want) || len(st.Labels) != len(want) {
			return false
		}
		for id, c := range want {
			if st.Counts[id] != c || st.Labels[id] != c {
				return false
			}
		}
		return true
	})
	if st.Tiles != tiles {
		t.Errorf("basemap %q, want %q", st.Tiles, tiles)
	}
	if st.Onscreen != len(want) {
		t.Errorf("%d of %d fences on screen after fitting the map to them", st.Onscreen, len(want))
	}
	for id, c := range want {
		white := st.Fills[id] == "rgb(255, 255, 255)"
		if (c == "0") != white {
			t.Errorf("%s: count %s but fill %s", id, c, st.Fills[id])
		}
	}
	if st.Fills["station-zoo"] != "rgb(211, 47, 47)" { // the busiest fence is the scale's red
		t.Errorf("busiest fence fill %s", st.Fills["station-zoo"])
	}
	if !st.Arcs["station-zoo"] || st.Arcs["park-tiergarten"] || st.Rules["park-tiergarten"] != "evenodd" {
		t.Errorf("circle fence drawn with arcs: %v; polygon with a hole: arcs %v, fill-rule %q", st.Arcs["station-zoo"], st.Arcs["park-tiergarten"], st.Rules["park-tiergarten"])
	}

	// Labels never overlap; at a low zoom the small fences' labels hide.
	type labelState struct {
		Zoom    float64
		Visible int
		Overlap []string
	}
	const readLabels = `JSON.stringify((() => {
		const ls = [...document.querySelectorAll('#map .count-label[data-fence-id]')].filter((l) => getComputedStyle(l).display !== 'none');
		const rs = ls.map((l) => [l.dataset.fenceId, l.getBoundingClientRect()]);
		const overlap = [];
		for (let i = 0; i < rs.length; i++) for (let j = i + 1; j < rs.length; j++) {
			const [a, ra] = rs[i], [b, rb] = rs[j];
			if (ra.left < rb.right && rb.left < ra.right && ra.top < rb.bottom && rb.top < ra.bottom) overlap.push(a + '/' + b);
		}
		return { zoom: window.fenceview.map.getZoom(), visible: ls.length, overlap };
	})())`
	var ls labelState
	page.eval(t, ctx, readLabels, &ls)
	if ls.Visible == 0 || len(ls.Overlap) > 0 {
		t.Errorf("at zoom %v: %d labels visible, overlapping: %v", ls.Zoom, ls.Visible, ls.Overlap)
	}
	fitted := ls.Zoom
	page.eval(t, ctx, `window.fenceview.map.setZoom(8, {animate: false}); "ok"`, nil)
	page.until(t, ctx, "labels hidden at zoom 8", readLabels, &ls, func() bool { return ls.Zoom == 8 && ls.Visible <= 1 })
	page.eval(t, ctx, fmt.Sprintf(`window.fenceview.map.setZoom(%v, {animate: false}); "ok"`, fitted), nil)
	page.until(t, ctx, "labels back at the fitted zoom", readLabels, &ls, func() bool { return ls.Zoom == fitted && ls.Visible > 1 && len(ls.Overlap) == 0 })

	// Nothing below reloads the page: a marker set now must survive.
	page.eval(t, ctx, `window.__noReload = 42; "ok"`, nil)

	// Counts follow the sources (the page polls).
	f.occ.put(&geofencepb.Occupancy{FenceId: "airport-ber", Count: 7, Devices: []string{"a1"}})
	page.until(t, ctx, "the new count of airport-ber", readMap, &st, func() bool { return st.Counts["airport-ber"] == "7" && st.Labels["airport-ber"] == "7" })
	f.occ.put(&geofencepb.Occupancy{FenceId: "airport-ber", Count: 1, Devices: []string{"a1"}})

	// A trigger published now appears in the list, above the one from
	// before the page opened.
	tr := trigger("dev-9|park-tiergarten|ENTER|123", "dev-9", "park-tiergarten")
	tr.EventTimeMs++
	f.feed.Publish(tr)
	var items []struct{ ID, Text, Fence string }
	page.until(t, ctx, "the trigger in the list, above the one from before", `JSON.stringify([...document.querySelectorAll('#triggers [data-trigger-id]')].map((li) => ({id: li.dataset.triggerId, text: li.textContent, fence: li.dataset.fenceId})))`, &items, func() bool {
		return len(items) == 2 && items[0].ID == tr.TriggerId && items[1].ID == "dev-0|station-zoo|ENTER|1"
	})
	if !strings.Contains(items[0].Text, "ENTER") || !strings.Contains(items[0].Text, "dev-9") || items[0].Fence != "park-tiergarten" {
		t.Errorf("trigger item %+v", items[0])
	}

	// Clicking a fence shows its effective settings, who is inside and its
	// recent triggers.
	page.eval(t, ctx, `document.querySelector('#map path[data-fence-id="park-tiergarten"]').dispatchEvent(new MouseEvent('click', {bubbles: true})); "ok"`, nil)
	type details struct {
		Inside   []string
		Settings map[string]string
		Own      []string
		Triggers []string
	}
	var d details
	page.until(t, ctx, "park-tiergarten's details", `JSON.stringify({
		inside: [...document.querySelectorAll('#details [data-device-id]')].filter((e) => e.tagName === 'LI' && e.parentElement.id === 'devices').map((li) => li.dataset.deviceId),
		settings: Object.fromEntries([...document.querySelectorAll('#settings [data-setting]')].map((e) => [e.dataset.setting, e.firstChild.textContent])),
		own: [...document.querySelectorAll('#settings [data-own="true"]')].map((e) => e.dataset.setting),
		triggers: [...document.querySelectorAll('#fence-triggers [data-trigger-id]')].map((li) => li.dataset.triggerId),
	})`, &d, func() bool {
		return strings.Join(d.Inside, ",") == "d1,d2,d3" && len(d.Settings) == 6 && len(d.Triggers) == 1
	})
	// The demo's park-tiergarten sets only its hysteresis (40 m); the rest
	// are the debouncer's defaults.
	wantSettings := map[string]string{"detector": "sprt", "min_samples": "3", "min_dwell_s": "10 s", "hysteresis_m": "40 m", "loiter_s": "5 min", "silence_timeout_s": "10 min"}
	for k, v := range wantSettings {
		if d.Settings[k] != v {
			t.Errorf("setting %s shown as %q, want %q", k, d.Settings[k], v)
		}
	}
	if strings.Join(d.Own, ",") != "hysteresis_m" || d.Triggers[0] != tr.TriggerId {
		t.Errorf("own settings %v, recent triggers %v", d.Own, d.Triggers)
	}
	var marker int
	page.eval(t, ctx, `window.__noReload`, &marker)
	if marker != 42 {
		t.Fatal("the page reloaded")
	}
	if ex := b.exceptions(); len(ex) > 0 {
		t.Errorf("the page threw: %v", ex)
	}
}

func screenshot(t *testing.T, ctx context.Context, page *page, name string) {
	t.Helper()
	var shot struct{ Data string }
	page.call(t, ctx, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	data, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	dir := os.Getenv("FENCESTREAM_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(data))
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
	target  string
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
	return &page{b: b, session: att.SessionID, target: target.TargetID}
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
