package fenceview_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

type fixture struct {
	srv   *httptest.Server
	devs  *fakeDevices
	occ   *fakeOccupancy
	ready *fakeReady
	feed  *fenceview.Feed
	cat   *fences.Catalogue
}

const catalogueVersion = 7

func newFixture(t *testing.T, opts ...fenceview.Opt) *fixture {
	t.Helper()
	cat := fences.New()
	if err := cat.Apply(catalogueVersion, fences.Demo(), nil); err != nil {
		t.Fatal(err)
	}
	f := &fixture{devs: &fakeDevices{}, occ: &fakeOccupancy{lag: map[int32]int64{}}, ready: &fakeReady{reason: "view of debouncer-table is recovering"}, feed: fenceview.NewFeed(0), cat: cat}
	f.occ.put(&geofencepb.Occupancy{FenceId: "park-tiergarten", Count: 3, EntersTotal: 10, ExitsTotal: 7, DwellsTotal: 2, LastChangeMs: 1_700_000_000_000, CatalogueVersion: 6,
		Members: map[string]*geofencepb.Member{"d3": {Inside: true}, "d1": {Inside: true}, "d2": {Inside: true}, "d4": {Inside: false}}})
	f.occ.put(&geofencepb.Occupancy{FenceId: "station-zoo", Count: 5, Devices: []string{"z5", "z4", "z3", "z2", "z1"}, EntersTotal: 5})
	f.occ.put(&geofencepb.Occupancy{FenceId: "airport-ber", Count: 1, Devices: []string{"a1"}, EntersTotal: 1})
	f.occ.put(&geofencepb.Occupancy{FenceId: "gone-fence", Count: 2, Devices: []string{"g1", "g2"}})
	f.devs.put(&geofencepb.DeviceState{DeviceId: "dev-1", LastHlc: 1_700_000_000_000<<16 | 3, LastEventTimeMs: 1_700_000_000_000, LastLat: 52.51, LastLon: 13.35,
		Pings: 42, StalePings: 1, Triggers: 2, CatalogueVersion: 7, Partition: 9,
		// The v1 layout (a map): the API reads it through debounce.Upgrade.
		Fences: map[string]*geofencepb.FenceState{
			"station-zoo":     {Phase: geofencepb.Phase_PHASE_ENTERING, CandidateSinceMs: 1_699_999_990_000, CandidateSamples: 1},
			"park-tiergarten": {Phase: geofencepb.Phase_PHASE_INSIDE, InsideSinceMs: 1_699_999_000_000, DwellFired: true},
		}})
	opts = append([]fenceview.Opt{fenceview.Logger(slog.New(slog.DiscardHandler))}, opts...)
	s, err := fenceview.NewServer(fenceview.Sources{Devices: f.devs, Occupancy: f.occ, Fences: cat, Ready: f.ready, Feed: f.feed}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(s)
	t.Cleanup(f.srv.Close)
	return f
}

// get fetches path and decodes a JSON body into out (when non-nil); it
// checks the Content-Type of JSON answers and that errors carry their status.
func (f *fixture) get(t *testing.T, path string, out any) int {
	t.Helper()
	return f.getBase(t, f.srv.URL, path, out)
}

func (f *fixture) getBase(t *testing.T, base, path string, out any) int {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("GET %s: Content-Type %q, body %s", path, ct, body)
	}
	if resp.StatusCode != http.StatusOK {
		var e fenceview.ErrorBody
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || e.Status != resp.StatusCode {
			t.Fatalf("GET %s: status %d with body %s: want {error, status} (err %v)", path, resp.StatusCode, body, err)
		}
		if out, ok := out.(*fenceview.ErrorBody); ok {
			*out = e
		}
		return resp.StatusCode
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return resp.StatusCode
}

func (f *fixture) wantStatus(t *testing.T, path string, want int) fenceview.ErrorBody {
	t.Helper()
	var e fenceview.ErrorBody
	if got := f.get(t, path, &e); got != want {
		t.Fatalf("GET %s: status %d, want %d", path, got, want)
	}
	return e
}

func ids(fs []*fenceview.FenceSummary) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.ID
	}
	return out
}

func TestFencesList(t *testing.T) {
	f := newFixture(t)
	var l fenceview.FenceList
	f.get(t, "/v1/fences", &l)
	demo := fences.Demo()
	if l.Total != len(demo) || len(l.Fences) != len(demo) || l.CatalogueVersion != catalogueVersion {
		t.Fatalf("total %d, %d fences, version %d; want %d, %d, %d", l.Total, len(l.Fences), l.CatalogueVersion, len(demo), len(demo), catalogueVersion)
	}
	if l.Sort != "id" || l.Order != "asc" || l.Bounds == nil || !(l.Bounds.South < l.Bounds.North && l.Bounds.West < l.Bounds.East) {
		t.Fatalf("sort %q order %q bounds %+v", l.Sort, l.Order, l.Bounds)
	}
	for i := 1; i < len(l.Fences); i++ {
		if l.Fences[i-1].ID >= l.Fences[i].ID {
			t.Fatalf("not sorted by id: %v", ids(l.Fences))
		}
	}
	for _, s := range l.Fences {
		if s.Geometry != nil {
			t.Fatalf("%s: geometry without ?geometry=true", s.ID)
		}
		if s.ID == "park-tiergarten" && (s.Count != 3 || s.EntersTotal != 10 || s.ExitsTotal != 7 || s.Kind != "polygon" && s.Kind != "multipolygon") {
			t.Fatalf("park-tiergarten: %+v", s)
		}
		if s.ID == "gone-fence" {
			t.Fatal("a fence deleted from the catalogue is listed")
		}
	}

	l = fenceview.FenceList{}
	f.get(t, "/v1/fences?sort=count", &l)
	if got := ids(l.Fences[:3]); strings.Join(got, ",") != "station-zoo,park-tiergarten,airport-ber" || l.Order != "desc" {
		t.Fatalf("sort=count: %v order %s", got, l.Order)
	}
	if l.Fences[3].Count != 0 || l.Fences[3].ID > l.Fences[4].ID {
		t.Fatalf("sort=count: ties not by id: %v", ids(l.Fences[3:5]))
	}
	f.get(t, "/v1/fences?sort=count&order=asc", &l)
	if last := l.Fences[len(l.Fences)-1]; last.ID != "station-zoo" {
		t.Fatalf("sort=count&order=asc: last is %s", last.ID)
	}
	f.get(t, "/v1/fences?order=desc&limit=2", &l)
	if l.Fences[0].ID <= l.Fences[1].ID || len(l.Fences) != 2 || l.Total != len(demo) {
		t.Fatalf("order=desc&limit=2: %v total %d", ids(l.Fences), l.Total)
	}
	f.get(t, fmt.Sprintf("/v1/fences?limit=5&offset=%d", len(demo)-3), &l)
	if len(l.Fences) != 3 || l.Offset != len(demo)-3 || l.Limit != 5 {
		t.Fatalf("last page: %d fences, offset %d, limit %d", len(l.Fences), l.Offset, l.Limit)
	}
	f.get(t, "/v1/fences?offset=1000", &l)
	if len(l.Fences) != 0 || l.Total != len(demo) {
		t.Fatalf("offset past the end: %d fences, total %d", len(l.Fences), l.Total)
	}
	f.get(t, "/v1/fences?geometry=true&limit=1", &l)
	var geo struct{ Type string }
	if err := json.Unmarshal(l.Fences[0].Geometry, &geo); err != nil || geo.Type == "" {
		t.Fatalf("geometry=true: %s (%v)", l.Fences[0].Geometry, err)
	}

	for _, q := range []string{"sort=name", "order=up", "limit=0", "limit=-1", "limit=abc", "limit=10001", "limit=", "offset=-1", "offset=x", "geometry=maybe"} {
		e := f.wantStatus(t, "/v1/fences?"+q, http.StatusBadRequest)
		if !strings.Contains(e.Error, strings.SplitN(q, "=", 2)[0]) {
			t.Errorf("?%s: error %q does not name the parameter", q, e.Error)
		}
	}
}

func TestFenceDetail(t *testing.T) {
	f := newFixture(t, fenceview.DeviceListCap(2))
	f.occ.lag[topology.PartitionFor("park-tiergarten", topology.DefaultPartitions)] = 4
	var d fenceview.FenceDetail
	f.get(t, "/v1/fences/park-tiergarten", &d)
	if d.Count != 3 || strings.Join(d.Devices, ",") != "d1,d2" || !d.DevicesTruncated || !d.InCatalogue {
		t.Fatalf("park-tiergarten: count %d devices %v truncated %v in catalogue %v", d.Count, d.Devices, d.DevicesTruncated, d.InCatalogue)
	}
	if d.EntersTotal != 10 || d.ExitsTotal != 7 || d.DwellsTotal != 2 || d.LastChange != "2023-11-14T22:13:20Z" || d.CatalogueVersion != catalogueVersion || d.OccupancyCatalogueVersion != 6 {
		t.Fatalf("park-tiergarten: %+v", d)
	}
	if d.Partition != topology.PartitionFor("park-tiergarten", 24) || d.LagRecords == nil || *d.LagRecords != 4 {
		t.Fatalf("partition %d lag %v", d.Partition, d.LagRecords)
	}
	var geo struct {
		Type        string
		Coordinates json.RawMessage
	}
	if err := json.Unmarshal(d.Geometry, &geo); err != nil || (geo.Type != "Polygon" && geo.Type != "MultiPolygon") {
		t.Fatalf("geometry %s: %v", d.Geometry, err)
	}

	d = fenceview.FenceDetail{}
	f.get(t, "/v1/fences/hospital-charite-mitte", &d)
	if d.Count != 0 || len(d.Devices) != 0 || d.Devices == nil || d.Kind != "circle" || d.RadiusM != 400 || d.LagRecords != nil {
		t.Fatalf("fence without occupancy: %+v", d)
	}
	d = fenceview.FenceDetail{}
	f.get(t, "/v1/fences/station-zoo", &d)
	if strings.Join(d.Devices, ",") != "z1,z2" || !d.DevicesTruncated {
		t.Fatalf("station-zoo devices %v", d.Devices)
	}
	d = fenceview.FenceDetail{}
	f.get(t, "/v1/fences/gone-fence", &d)
	if d.InCatalogue || d.Count != 2 || d.Geometry != nil {
		t.Fatalf("deleted fence with occupancy: %+v", d)
	}

	f.wantStatus(t, "/v1/fences/no-such-fence", http.StatusNotFound)
	f.wantStatus(t, "/v1/fences/", http.StatusBadRequest)
	f.wantStatus(t, "/v1/fences/%ff%fe", http.StatusBadRequest)
	f.wantStatus(t, "/v1/fences/"+strings.Repeat("x", topology.MaxKeyBytes+1), http.StatusBadRequest)
	f.wantStatus(t, "/v1/fences/"+strings.Repeat("x", topology.MaxKeyBytes), http.StatusNotFound)
}

func TestDevice(t *testing.T) {
	f := newFixture(t)
	var d fenceview.DeviceDetail
	f.get(t, "/v1/devices/dev-1", &d)
	if d.DeviceID != "dev-1" || d.Partition != topology.PartitionFor("dev-1", 24) || d.LastHLC != 1_700_000_000_000<<16|3 || d.LastHLCLogical != 3 {
		t.Fatalf("dev-1: %+v", d)
	}
	if d.LastPingTime != "2023-11-14T22:13:20Z" || d.LastHLCWall != "2023-11-14T22:13:20Z" || d.Pings != 42 || d.StalePings != 1 || d.Triggers != 2 || d.CatalogueVersion != 7 {
		t.Fatalf("dev-1: %+v", d)
	}
	if len(d.Fences) != 2 || d.Fences[0].FenceID != "park-tiergarten" || d.Fences[0].Phase != "INSIDE" || !d.Fences[0].DwellFired ||
		d.Fences[0].FenceName != "Großer Tiergarten" && d.Fences[0].FenceName == "" || d.Fences[1].Phase != "ENTERING" || d.Fences[1].CandidateSamples != 1 {
		t.Fatalf("dev-1 fences: %+v", d.Fences)
	}
	f.wantStatus(t, "/v1/devices/dev-2", http.StatusNotFound)
	f.wantStatus(t, "/v1/devices/", http.StatusBadRequest)
	f.wantStatus(t, "/v1/devices/%C0%AF", http.StatusBadRequest)
	f.wantStatus(t, "/v1/devices/"+strings.Repeat("ü", 128), http.StatusBadRequest) // 256 bytes
}

func TestNotReady(t *testing.T) {
	f := newFixture(t)
	f.ready.notReady.Store(true)
	for _, p := range []string{"/v1/fences", "/v1/fences/park-tiergarten", "/v1/fences/unknown", "/v1/devices/dev-1", "/v1/devices/unknown", "/readyz"} {
		e := f.wantStatus(t, p, http.StatusServiceUnavailable)
		if e.Reason != f.ready.reason || !strings.Contains(e.Error, f.ready.reason) {
			t.Fatalf("%s: %+v does not give the reason", p, e)
		}
	}
	f.get(t, "/healthz", nil)
	f.get(t, "/v1/partition?key=k", nil)
	f.get(t, "/v1/topology", nil)

	f.ready.notReady.Store(false)
	f.get(t, "/readyz", nil)
	// A source without a complete copy answers 503 even when Readiness lags behind.
	f.occ.err = fmt.Errorf("view: %w", fenceview.ErrNotReady)
	f.wantStatus(t, "/v1/fences", http.StatusServiceUnavailable)
	f.wantStatus(t, "/v1/fences/park-tiergarten", http.StatusServiceUnavailable)
	f.occ.err = errors.New("disk on fire")
	f.wantStatus(t, "/v1/fences", http.StatusInternalServerError)
	f.devs.err = errors.New("disk on fire")
	f.wantStatus(t, "/v1/devices/dev-1", http.StatusInternalServerError)
}

func TestPartition(t *testing.T) {
	f := newFixture(t)
	for i, want := range []int32{2, 2, 5, 1, 4, 5} { // seed vectors, 6 partitions, real brokers
		var a fenceview.PartitionAnswer
		key := fmt.Sprintf("user-%d", i+1)
		f.get(t, "/v1/partition?partitions=6&key="+key, &a)
		if a.Partition != want || a.Partitions != 6 || a.Key != key {
			t.Errorf("%s: %+v, want partition %d", key, a, want)
		}
		if a.Murmur2 != fmt.Sprintf("%08x", topology.Murmur2([]byte(key))) || a.Positive != fmt.Sprintf("%08x", topology.PositiveMurmur2([]byte(key))) {
			t.Errorf("%s: murmur2 %s positive %s", key, a.Murmur2, a.Positive)
		}
	}
	var a fenceview.PartitionAnswer
	f.get(t, "/v1/partition?key=o-2&partitions=3", &a)
	if a.Partition != 0 {
		t.Errorf("o-2 on 3: %d, want 0 (Math.abs would say 2)", a.Partition)
	}
	f.get(t, "/v1/partition?key=user-1", &a)
	if a.Partitions != 24 || a.Partition != topology.PartitionFor("user-1", 24) {
		t.Errorf("default partitions: %+v", a)
	}
	f.get(t, "/v1/partition?key=%E5%8C%97%E4%BA%AC&partitions=10000", &a)
	if a.Key != "北京" || a.Partition != topology.PartitionFor("北京", 10000) {
		t.Errorf("non-ASCII key: %+v", a)
	}
	for _, q := range []string{"", "key=", "partitions=6", "key=%ff", "key=" + strings.Repeat("k", 256), "key=a&partitions=0",
		"key=a&partitions=10001", "key=a&partitions=-3", "key=a&partitions=six", "key=a&partitions=", "key=a&partitions=99999999999"} {
		f.wantStatus(t, "/v1/partition?"+q, http.StatusBadRequest)
	}
}

func TestTopology(t *testing.T) {
	f := newFixture(t, fenceview.Topology(geofence.Topology(geofence.Partitions(6))))
	var tj fenceview.TopologyJSON
	f.get(t, "/v1/topology", &tj)
	if !strings.Contains(tj.Describe, "ORDERING BOUNDARY") || !strings.HasPrefix(tj.Mermaid, "flowchart") || tj.Name != "geofence" {
		t.Fatalf("describe/mermaid: %+v", tj)
	}
	nb := len(geofence.Topology().Boundaries) // occupancy's, and visit-rekey's two
	if len(tj.Boundaries) != nb || tj.Boundaries[0].Processor != geofence.GroupOccupancyMembers || tj.Boundaries[0].From != geofence.TopicTriggers || tj.Boundaries[0].To != geofence.TopicOccupancyChanges ||
		tj.Boundaries[0].FromKey != "device_id" || tj.Boundaries[0].ToKey != "fence_id" || tj.Boundaries[0].Preserved == "" || tj.Boundaries[0].Lost == "" {
		t.Fatalf("boundaries: %+v", tj.Boundaries)
	}
	marked := 0
	for _, p := range tj.Processors {
		for _, fl := range p.Flows {
			if fl.Boundary {
				marked++
			}
		}
	}
	if marked != nb || len(tj.Topics) == 0 || tj.Topics[0].Partitions != 6 {
		t.Fatalf("flows marked as boundary: %d; topics %+v", marked, tj.Topics)
	}
	// The topology's partition count is /v1/partition's default.
	var a fenceview.PartitionAnswer
	f.get(t, "/v1/partition?key=user-1", &a)
	if a.Partitions != 6 || a.Partition != 2 {
		t.Fatalf("default partitions from the topology: %+v", a)
	}
}

func TestPageHealthMetricsAndUnknownRoutes(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `id="triggers"`},
		{"/static/app.js", "text/javascript; charset=utf-8", "EventSource"},
		{"/static/style.css", "text/css; charset=utf-8", "fill-rule"},
		// Leaflet is embedded in the binary, its licence with it.
		{"/static/vendor/leaflet/leaflet.js", "text/javascript; charset=utf-8", "Leaflet 1.9.4"},
		{"/static/vendor/leaflet/leaflet.css", "text/css; charset=utf-8", ".leaflet-container"},
		{"/static/vendor/leaflet/LICENSE", "text/plain", "BSD 2-Clause License"},
		{"/static/vendor/leaflet/images/layers.png", "image/png", "PNG"},
		{"/metrics", "text/plain", "fencestream_trigger_processing_latency_seconds"},
		{"/healthz", "application/json; charset=utf-8", `"ok"`},
	} {
		resp, err := http.Get(f.srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s: %d %q, body contains %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contains, strings.Contains(string(body), c.contains))
		}
	}
	for _, p := range []string{"/v1/nope", "/nope", "/static/missing.js"} {
		resp, err := http.Get(f.srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	f.wantStatus(t, "/v1/nope", http.StatusNotFound)
	// The API is read-only: another method on a route it serves is 405 with
	// Allow; on a route it does not serve, 404.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/v1/fences", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/v1/fences/park-tiergarten", http.StatusMethodNotAllowed},
		{http.MethodPut, "/v1/devices/dev-1", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/triggers/stream", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/v1/partition?key=a", http.StatusMethodNotAllowed},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/nope", http.StatusNotFound},
		{http.MethodDelete, "/nope", http.StatusNotFound},
	} {
		req, err := http.NewRequest(c.method, f.srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e fenceview.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.want || err != nil || e.Status != c.want {
			t.Errorf("%s %s: %d (body %+v, %v), want %d", c.method, c.path, resp.StatusCode, e, err, c.want)
		}
		allow := resp.Header.Get("Allow")
		if c.want == http.StatusMethodNotAllowed && allow != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q, want \"GET, HEAD\"", c.method, c.path, allow)
		}
		if c.want == http.StatusNotFound && allow != "" {
			t.Errorf("%s %s: Allow %q on a 404", c.method, c.path, allow)
		}
	}
}

// sseEvent is one parsed Server-Sent Event (comment lines collected too).
type sseEvent struct {
	id, event, data string
	comments        []string
}

// openStream connects to the trigger stream and parses events into a
// channel until the test ends.
func openStream(t *testing.T, ctx context.Context, url string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream %s: %d %s", url, resp.StatusCode, body)
	}
	ch := make(chan sseEvent, 100)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.comments = append(ev.comments, strings.TrimSpace(line[1:]))
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch, resp
}

// nextEvent waits for the next event of the given type.
func nextEvent(t *testing.T, ch <-chan sseEvent, event string) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended waiting for %q", event)
			}
			if ev.event == event {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %q event within 10s", event)
		}
	}
}

func trigger(id, device, fence string) *geofencepb.Trigger {
	return &geofencepb.Trigger{TriggerId: id, DeviceId: device, FenceId: fence, Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER,
		Reason: geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED, EventTimeMs: 1_700_000_000_000, Hlc: 99, CatalogueVersion: 7, Lat: 52.5, Lon: 13.4}
}

// waitFor polls cond until it holds or 10s pass.
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

func TestTriggerStream(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	all, resp := openStream(t, ctx, f.srv.URL+"/v1/triggers/stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("stream headers: %v", resp.Header)
	}
	byFence, _ := openStream(t, ctx, f.srv.URL+"/v1/triggers/stream?fence=station-zoo")
	byDevice, _ := openStream(t, ctx, f.srv.URL+"/v1/triggers/stream?device=dev-2&fence=")
	// Subscribed before the headers were written: publishing now reaches all three.
	if n := f.feed.Subscribers(); n != 3 {
		t.Fatalf("%d subscribers, want 3", n)
	}
	f.feed.Publish(trigger("t1", "dev-1", "park-tiergarten"))
	f.feed.Publish(trigger("t2", "dev-2", "park-tiergarten"))
	f.feed.Publish(trigger("t3", "dev-1", "station-zoo"))

	for _, want := range []string{"t1", "t2", "t3"} {
		ev := nextEvent(t, all, "trigger")
		var tj fenceview.TriggerJSON
		if err := json.Unmarshal([]byte(ev.data), &tj); err != nil {
			t.Fatal(err)
		}
		if ev.id != want || tj.TriggerID != want || tj.Type != "ENTER" || tj.Reason != "CONFIRMED" || tj.EventTime != "2023-11-14T22:13:20Z" || tj.HLC != 99 {
			t.Fatalf("event %+v (%+v), want %s", ev, tj, want)
		}
	}
	if ev := nextEvent(t, byFence, "trigger"); ev.id != "t3" {
		t.Fatalf("fence filter passed %s", ev.id)
	}
	if ev := nextEvent(t, byDevice, "trigger"); ev.id != "t2" {
		t.Fatalf("device filter passed %s", ev.id)
	}

	// The client going away ends the handler and its subscription.
	cancel()
	waitFor(t, "subscriptions to close after the clients left", func() bool { return f.feed.Subscribers() == 0 })

	f.wantStatus(t, "/v1/triggers/stream?fence=%ff", http.StatusBadRequest)
	// An unknown fence is 503 while the sources recover, then 404; a fence
	// deleted from the catalogue that still has occupancy streams.
	f.ready.notReady.Store(true)
	f.wantStatus(t, "/v1/triggers/stream?fence=no-such", http.StatusServiceUnavailable)
	f.ready.notReady.Store(false)
	f.wantStatus(t, "/v1/triggers/stream?fence=no-such", http.StatusNotFound)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	gone, _ := openStream(t, ctx, f.srv.URL+"/v1/triggers/stream?fence=gone-fence")
	f.feed.Publish(trigger("t4", "g1", "gone-fence"))
	if ev := nextEvent(t, gone, "trigger"); ev.id != "t4" {
		t.Fatalf("stream of a deleted fence passed %s", ev.id)
	}
	f.wantStatus(t, "/v1/triggers/stream?device="+strings.Repeat("d", 300), http.StatusBadRequest)
}

func TestTriggerStreamHeartbeat(t *testing.T) {
	f := newFixture(t, fenceview.Heartbeat(20*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := openStream(t, ctx, f.srv.URL+"/v1/triggers/stream")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-ch:
			for _, c := range ev.comments {
				if strings.HasPrefix(c, "heartbeat") {
					return
				}
			}
		case <-deadline:
			t.Fatal("no heartbeat within 10s")
		}
	}
}

func TestNewServerValidates(t *testing.T) {
	if _, err := fenceview.NewServer(fenceview.Sources{}); err == nil || !strings.Contains(err.Error(), "Devices") {
		t.Fatalf("missing sources: %v", err)
	}
	src := fenceview.Sources{Devices: &fakeDevices{}, Occupancy: &fakeOccupancy{}, Fences: fences.New(), Ready: &fakeReady{}, Feed: fenceview.NewFeed(1)}
	if _, err := fenceview.NewServer(src, fenceview.Heartbeat(0)); err == nil {
		t.Fatal("zero heartbeat accepted")
	}
	if _, err := fenceview.NewServer(src, fenceview.DeviceListCap(0)); err == nil {
		t.Fatal("zero device cap accepted")
	}
	if _, err := fenceview.NewServer(src); err != nil {
		t.Fatal(err)
	}
	// One Opt type serves NewServer and Run: an option only Run reads is
	// refused by NewServer, naming it, rather than ignored.
	if _, err := fenceview.NewServer(src, fenceview.StateDir("x"), fenceview.WritableSubscriptions()); err == nil ||
		!strings.Contains(err.Error(), "StateDir: an option of Run, given to NewServer") || !strings.Contains(err.Error(), "WritableSubscriptions: an option of Run") {
		t.Fatalf("Run's options given to NewServer: %v", err)
	}
}

// Run checks its options together, naming each bad one, before it touches
// the broker, and closes the listener it was given.
func TestRunValidatesOptionsTogether(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = fenceview.Run(context.Background(), cluster.Config{}, l, fenceview.Partitions(-1), fenceview.ShutdownTimeout(0), fenceview.MaxStaleness(0), fenceview.Registerer(nil))
	for _, want := range []string{"Partitions: must be positive", "ShutdownTimeout: must be positive", "MaxStaleness: must be positive", "Registerer: nil registerer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error containing %q, got %v", want, err)
		}
	}
	if _, err := l.Accept(); err == nil {
		t.Error("Run left the listener open")
	}
}

func TestRecentTriggers(t *testing.T) {
	f := newFixture(t)
	f.feed.Publish(trigger("t1", "dev-1", "park-tiergarten"))
	f.feed.Publish(trigger("t2", "dev-2", "station-zoo"))
	var l fenceview.TriggerList
	if s := f.get(t, "/v1/triggers", &l); s != http.StatusOK || len(l.Triggers) != 2 || l.Triggers[0].TriggerID != "t2" ||
		l.Limit != fenceview.DefaultTriggerLimit || l.History != fenceview.DefaultHistory {
		t.Fatalf("/v1/triggers: %d %+v", s, l)
	}
	if f.get(t, "/v1/triggers?fence=park-tiergarten&limit=5", &l); len(l.Triggers) != 1 || l.Triggers[0].TriggerID != "t1" {
		t.Fatalf("by fence: %+v", l)
	}
	f.wantStatus(t, "/v1/triggers?limit=0", http.StatusBadRequest)
	f.wantStatus(t, fmt.Sprintf("/v1/triggers?limit=%d", fenceview.DefaultHistory+1), http.StatusBadRequest)
	f.wantStatus(t, "/v1/triggers?fence=no-such", http.StatusNotFound)
	f.ready.notReady.Store(true)
	f.wantStatus(t, "/v1/triggers", http.StatusServiceUnavailable)
}

func TestFenceSettingsAndPageConfig(t *testing.T) {
	defaults := debounce.DefaultSettings()
	defaults.MinSamples = 4 // what the debouncer was started with
	f := newFixture(t, fenceview.DebounceDefaults(defaults))
	var d fenceview.FenceDetail
	f.get(t, "/v1/fences/airport-ber", &d)
	// The demo's airport sets min_samples 3, min_dwell_s 60, hysteresis_m
	// 100 and loiter_s 1800; its silence timeout is the default.
	want := fenceview.SettingsJSON{MinSamples: 3, MinDwellS: 60, HysteresisM: 100, LoiterS: 1800, SilenceTimeoutS: 600, Detector: string(debounce.DetectorSPRT),
		Own: []string{"min_samples", "min_dwell_s", "hysteresis_m", "loiter_s"}}
	if d.Settings == nil || fmt.Sprint(*d.Settings) != fmt.Sprint(want) {
		t.Fatalf("airport-ber settings %+v, want %+v", d.Settings, want)
	}
	f.get(t, "/v1/fences/station-zoo", &d)
	if d.Settings == nil || d.Settings.MinSamples != 4 || d.Settings.MinDwellS != 10 || len(d.Settings.Own) != 0 {
		t.Fatalf("station-zoo (no settings of its own): %+v", d.Settings)
	}
	var gone fenceview.FenceDetail
	f.get(t, "/v1/fences/gone-fence", &gone)
	if gone.Settings != nil {
		t.Fatalf("a fence not in the catalogue has settings %+v", gone.Settings)
	}

	var cfg fenceview.PageConfig
	if f.get(t, "/v1/config", &cfg); cfg.Tiles != "" || cfg.History != fenceview.DefaultHistory {
		t.Fatalf("default page config %+v", cfg)
	}
	osm := newFixture(t, fenceview.Map(fenceview.MapConfig{Tiles: fenceview.DefaultTiles}))
	if osm.get(t, "/v1/config", &cfg); cfg.Tiles != fenceview.DefaultTiles || !strings.Contains(cfg.TilesAttribution, "OpenStreetMap") {
		t.Fatalf("OpenStreetMap page config %+v", cfg)
	}
	for _, bad := range []string{"ftp://x/{z}/{x}/{y}", "https://tiles.example/{z}/{x}.png", "tiles"} {
		if _, err := fenceview.NewServer(fenceview.Sources{Devices: f.devs, Occupancy: f.occ, Fences: f.cat, Ready: f.ready, Feed: f.feed},
			fenceview.Map(fenceview.MapConfig{Tiles: bad})); err == nil {
			t.Errorf("tiles %q accepted", bad)
		}
	}
}

func TestMapConfigFlags(t *testing.T) {
	for _, c := range []struct {
		args  []string
		tiles string
	}{{nil, fenceview.DefaultTiles}, {[]string{"--tiles", "none"}, ""}, {[]string{"--tiles", "https://t.example/{z}/{x}/{y}.png"}, "https://t.example/{z}/{x}/{y}.png"}} {
		var m fenceview.MapConfig
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		m.RegisterFlags(fs)
		if err := fs.Parse(c.args); err != nil || m.Validate() != nil || m.Tiles != c.tiles {
			t.Errorf("%q: tiles %q (%v, %v), want %q", c.args, m.Tiles, err, m.Validate(), c.tiles)
		}
	}
}
