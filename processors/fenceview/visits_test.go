package fenceview_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
)

type fakeVisits map[string]*visitspb.FenceVisits

func (f fakeVisits) FenceVisits(id string) (*visitspb.FenceVisits, error) { return f[id], nil }

func TestFenceVisitsRoute(t *testing.T) {
	f := newFixture(t)
	h0 := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC).UnixMilli()
	hour := time.Hour.Milliseconds()
	src := fakeVisits{"station-zoo": {
		FenceId: "station-zoo",
		Enters:  &kitpb.WindowSet{Windows: []*kitpb.Window{{StartMs: h0, EndMs: h0 + hour, Count: 4, Closed: true}, {StartMs: h0 + hour, EndMs: h0 + 2*hour, Count: 1}}, Late: 2},
		Dwell:   &kitpb.WindowSet{Windows: []*kitpb.Window{{StartMs: h0, EndMs: h0 + hour, Count: 2, Sum: 900, Closed: true}}},
		Recent: []*visitspb.Visit{
			{VisitId: "v1", DeviceId: "z1", FenceId: "station-zoo", EnteredMs: h0, LeftMs: h0 + 600_000, DurationMs: 600_000, ExitReason: geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED},
			{VisitId: "v2", DeviceId: "z2", FenceId: "station-zoo", EnteredMs: h0, LeftMs: h0 + 300_000, DurationMs: 300_000, ExitReason: geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT},
		},
	}}
	s, err := fenceview.NewServer(fenceview.Sources{Devices: f.devs, Occupancy: f.occ, Fences: f.cat, Ready: f.ready, Feed: f.feed, Visits: src},
		fenceview.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()

	var got struct {
		FenceID string `json:"fence_id"`
		Hours   []struct {
			Start        time.Time `json:"start"`
			Enters       int64     `json:"enters"`
			Visits       int64     `json:"visits"`
			MeanDwellSec float64   `json:"mean_dwell_s"`
			Final        bool      `json:"final"`
		} `json:"hours"`
		Recent []struct {
			DeviceID   string  `json:"device_id"`
			DurationS  float64 `json:"duration_s"`
			ExitReason string  `json:"exit_reason"`
		} `json:"recent"`
		LateEnters int64 `json:"late_enters"`
	}
	if code := f.getBase(t, srv.URL, "/v1/fences/station-zoo/visits", &got); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	if len(got.Hours) != 2 || got.Hours[0].Enters != 4 || got.Hours[0].Visits != 2 || got.Hours[0].MeanDwellSec != 450 || !got.Hours[0].Final ||
		got.Hours[1].Enters != 1 || got.Hours[1].Final || got.LateEnters != 2 {
		t.Fatalf("hours %+v late %d", got.Hours, got.LateEnters)
	}
	if len(got.Recent) != 2 || got.Recent[0].DeviceID != "z2" || got.Recent[0].ExitReason != "TRIGGER_REASON_TIMEOUT" || got.Recent[0].DurationS != 300 {
		t.Fatalf("recent %+v, want newest first", got.Recent)
	}
	// A catalogued fence without visits: empty lists; an unknown one: 404.
	if code := f.getBase(t, srv.URL, "/v1/fences/airport-ber/visits", &got); code != http.StatusOK || len(got.Hours) != 0 || got.Hours == nil {
		t.Fatalf("fence without visits: %d %+v", code, got)
	}
	if code := f.getBase(t, srv.URL, "/v1/fences/no-such/visits", &fenceview.ErrorBody{}); code != http.StatusNotFound {
		t.Fatalf("unknown fence: %d", code)
	}
	// A server without a visit source answers 404, not 500.
	if code := f.get(t, "/v1/fences/station-zoo/visits", &fenceview.ErrorBody{}); code != http.StatusNotFound {
		t.Fatalf("without visits: %d", code)
	}
}
