package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
)

// A background attempt whose partition is lost (its context cancelled) ends
// at once, skipped (not counted, no breaker failure); an answer never
// picked up is swept after flightTTL, and a running one is not.
func TestFlightsCancelAndSweep(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close (deferred calls run in reverse)
	cfg := defaultConfig()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(&cfg, m)
	fs := newFlights()
	sub := &deliverypb.Subscription{Id: "s", Url: srv.URL + "/hook", Secret: "k", Enabled: true}
	tr := &geofencepb.Trigger{DeviceId: "d", TriggerId: "d|f|ENTER|1"}

	ctx, cancel := context.WithCancel(context.Background())
	lost := flightKey{"d", "s", "d|f|ENTER|1"}
	f := fs.start(ctx, s, lost, sub, tr)
	if f.answered() {
		t.Fatal("answered before the endpoint did")
	}
	cancel()
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled attempt still runs after 10 s")
	}
	if !f.r.skipped || f.r.ok {
		t.Errorf("cancelled attempt: %+v, want skipped", f.r)
	}
	if ep := s.endpoint(endpointOf(sub.GetUrl())); ep.failures != 0 {
		t.Errorf("a cancelled attempt counted as the endpoint's failure (%d)", ep.failures)
	}

	// The lost key's answer is never picked up: once older than flightTTL,
	// the next start sweeps it; the running attempt stays.
	running := flightKey{"d", "s", "d|f|ENTER|2"}
	fs.start(context.Background(), s, running, sub, tr)
	fs.mu.Lock()
	fs.m[lost].finished = time.Now().Add(-2 * flightTTL)
	fs.swept = time.Time{}
	fs.mu.Unlock()
	fs.start(context.Background(), s, flightKey{"d", "s", "d|f|ENTER|3"}, sub, tr)
	if fs.get(lost) != nil {
		t.Error("an answer older than flightTTL was not swept")
	}
	if fs.get(running) == nil {
		t.Error("a running attempt was swept")
	}
}
