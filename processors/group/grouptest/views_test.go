package grouptest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology/cluster"
)

var at = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

// A view started after its table was written (one record: Goka's tester
// then has not marked its copy read, and the view used to stay recovering)
// answers at once, and keeps up afterwards.
func TestViewStartedAfterRecordsAnswers(t *testing.T) {
	h := grouptest.New(t, at)
	h.Start(counter())
	h.Consume(in, "a", &geofencepb.Ping{DeviceId: "a", DeviceTimeMs: at.UnixMilli()})
	v := grouptest.View[geofencepb.DeviceState](h, table)
	if st, err := v.Get("a"); err != nil || st.GetPings() != 1 {
		t.Fatalf("Get(a) = %v, %v; want 1 ping", st, err)
	}
	h.Consume(in, "a", &geofencepb.Ping{DeviceId: "a", DeviceTimeMs: at.UnixMilli()})
	if st, err := v.Get("a"); err != nil || st.GetPings() != 2 {
		t.Fatalf("Get(a) after another ping = %v, %v; want 2 pings", st, err)
	}
}

// A route built after records were consumed answers 200 on its first request.
func TestRouteStartedAfterRecordsAnswers(t *testing.T) {
	h := grouptest.New(t, at)
	h.Start(counter())
	h.Consume(in, "a", &geofencepb.Ping{DeviceId: "a", DeviceTimeMs: at.UnixMilli()})
	r := host.ViewRoute("GET /pings/{id}", table, func(v *group.View[geofencepb.DeviceState, *geofencepb.DeviceState], w http.ResponseWriter, r *http.Request) {
		st, err := v.Get(r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, st.GetPings())
	})
	mux := http.NewServeMux()
	mux.Handle(r.Pattern, h.Route(r))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pings/a", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "1" {
		t.Fatalf("GET /pings/a: %d %q, want 200 \"1\"", rec.Code, rec.Body)
	}
}

// failures runs fn with a harness on a recording TB and returns what failed
// it, failing t if fn neither finishes nor fails within a minute.
func failures(t *testing.T, fn func(h *grouptest.Harness)) string {
	t.Helper()
	rec := &recorder{T: t}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		fn(grouptest.New(rec, at))
		rec.Errorf("fn went on")
	}()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		t.Fatal("the harness hung")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return strings.Join(rec.msgs, "\n")
}

// A view built on the tester by hand and not started fails the next Consume
// within StartupWait, saying why (Goka's tester waited for it silently until
// go test's timeout).
func TestUnstartedViewFailsConsume(t *testing.T) {
	start := time.Now()
	got := failures(t, func(h *grouptest.Harness) {
		h.Start(counter())
		if _, err := group.NewView[geofencepb.DeviceState](cluster.Config{}, table, group.ViewTester(h.TT)); err != nil {
			t.Error(err)
			return
		}
		h.Consume(in, "a", &geofencepb.Ping{DeviceId: "a"})
	})
	if !strings.Contains(got, "consume "+in+": Goka's tester has waited") || !strings.Contains(got, "whose Run had not started") {
		t.Fatalf("failures %q, want one naming a view whose Run had not started", got)
	}
	if took := time.Since(start); took > grouptest.StartupWait+30*time.Second {
		t.Errorf("failed after %v", took)
	}
}

// A view of a table whose records the tester's copy does not hold (written
// by hand) could never recover: it fails at once, naming table and key.
func TestViewOfTableWrittenByHandFails(t *testing.T) {
	got := failures(t, func(h *grouptest.Harness) {
		h.Start(counter())
		h.TT.Consume(table, "by-hand", &geofencepb.DeviceState{DeviceId: "by-hand"})
		grouptest.View[geofencepb.DeviceState](h, table)
	})
	if !strings.Contains(got, "a view of "+table+" started after its table got 1 records") || !strings.Contains(got, `key "by-hand"`) {
		t.Fatalf("failures %q, want one naming %s and key by-hand", got, table)
	}
}
