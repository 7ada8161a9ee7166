package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
)

// The route answers a subscription's status from a view of the status
// table: delivered, failed attempts, pending, last success and last error;
// 404 for a subscription with no deliveries.
func TestStatusRoute(t *testing.T) {
	failing := newReceiver(t, "s3cret-failing", func(_ int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusBadGateway)
		return false
	})
	ok := newReceiver(t, "s3cret-ok", nil)
	subs := delivery.NewSubscriptions()
	subs.Put(sub("failing", failing.url()))
	subs.Put(sub("ok", ok.url()))
	h := start(t, subs)
	h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", 1))
	h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", 2))
	h.Catchup()

	mux := http.NewServeMux()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range delivery.Module().Routes {
		hd, run, err := r.Build(host.RouteEnv{View: []view.Opt{view.Tester(h.TT)}})
		if err != nil {
			t.Fatal(err)
		}
		go run(ctx)
		mux.Handle(r.Pattern, hd)
	}
	get := func(path string) (int, map[string]any) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusServiceUnavailable || time.Now().After(deadline) {
				var v map[string]any
				json.Unmarshal(rec.Body.Bytes(), &v) //nolint:errcheck // checked by the caller's expectations
				return rec.Code, v
			}
			time.Sleep(10 * time.Millisecond) // the view is recovering; bounded by the deadline
		}
	}
	code, v := get("/v1/subscriptions/ok")
	if code != http.StatusOK || v["delivered"] != 2.0 || v["pending"] != 0.0 || v["last_success"] == nil {
		t.Errorf("ok: %d %v", code, v)
	}
	code, v = get("/v1/subscriptions/failing")
	if code != http.StatusOK || v["delivered"] != 0.0 || v["pending"] != 2.0 || v["failed_attempts"] != 1.0 ||
		!strings.Contains(v["last_error"].(string), "502") || v["last_error_at"] == nil {
		t.Errorf("failing: %d %v", code, v)
	}
	if code, _ := get("/v1/subscriptions/none"); code != http.StatusNotFound {
		t.Errorf("unknown subscription: %d, want 404", code)
	}
}

// A device's queue is bounded: past MaxPending the trigger is given up
// (queue-full), and a trigger failing MaxAttempts times is given up
// (attempts), which lets the next one go; the endpoint's breaker opens
// after its failures, and attempts while it is open are deferred, not sent.
func TestBoundsAndBreaker(t *testing.T) {
	down := newReceiver(t, "s3cret-down", func(_ int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return false
	})
	subs := delivery.NewSubscriptions()
	subs.Put(sub("down", down.url()))
	h := start(t, subs, delivery.MaxPending(3), delivery.MaxAttempts(2), delivery.Breaker(2, time.Minute))
	for n := 1; n <= 4; n++ {
		h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", n))
	}
	dead := grouptest.Drain[deliverypb.DeadDelivery](h, delivery.TopicDead)
	if len(dead) != 1 || dead[0].Value.GetReason() != "queue-full" || dead[0].Value.GetTrigger().GetHlc() != 4 {
		t.Fatalf("dead letters %v, want trigger 4 queue-full", dead)
	}
	if n := down.callCount(); n != 1 {
		t.Fatalf("calls %d before any retry, want 1 (only the head)", n)
	}
	h.Advance(5 * time.Second) // past the backoff: the second attempt fails, opening the breaker; trigger 1 is given up
	h.FireTimers()
	if n := down.callCount(); n != 2 {
		t.Fatalf("calls %d, want 2", n)
	}
	dead = grouptest.Drain[deliverypb.DeadDelivery](h, delivery.TopicDead)
	if len(dead) != 1 || dead[0].Value.GetReason() != "attempts" || dead[0].Value.GetAttempts() != 2 || dead[0].Value.GetLastError() == "" {
		t.Fatalf("dead letters %v, want trigger 1 after 2 attempts", dead)
	}
	// Trigger 2 is the head now, but the breaker is open: deferred, unsent.
	h.Advance(5 * time.Second)
	h.FireTimers()
	if n := down.callCount(); n != 2 {
		t.Fatalf("calls %d while the breaker is open, want 2", n)
	}
	st := grouptest.State[deliverypb.DeviceDeliveries](h, delivery.Table, "dev-1")
	if q := st.GetQueues(); len(q) != 1 || len(q[0].GetItems()) != 2 || q[0].GetItems()[0].GetAttempts() != 0 {
		t.Fatalf("queue %v, want triggers 2 and 3 waiting, no attempt counted", q)
	}
	h.Advance(time.Minute) // the breaker lets one probe through
	h.FireTimers()
	if n := down.callCount(); n != 3 {
		t.Fatalf("calls %d after the cooldown, want 3 (one probe)", n)
	}
}

// An endpoint's concurrency cap: with a cap of 1, of two subscriptions on
// one origin attempted together, one request is sent and the other is
// deferred (not sent, not counted as an attempt), then sent on its timer.
func TestEndpointConcurrencyCap(t *testing.T) {
	release := make(chan struct{})
	slowOK := newReceiver(t, "s3cret-a", func(call int, w http.ResponseWriter) bool {
		if call == 1 {
			<-release
		}
		return true
	})
	subs := delivery.NewSubscriptions()
	subs.Put(sub("a", slowOK.url()))
	b := sub("b", slowOK.url()+"/b")
	b.Secret = "s3cret-a"
	subs.Put(b)
	reg := prometheus.NewRegistry()
	h := startOn(t, reg, subs, delivery.EndpointConcurrency(1))
	go func() {
		// Hold the first request until the other has been deferred (the
		// handler returns only once both attempts have).
		defer close(release)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if deferred(reg) > 0 {
				return
			}
		}
	}()
	h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", 1))
	if n := slowOK.callCount(); n != 1 {
		t.Fatalf("calls %d with a cap of 1, want 1", n)
	}
	st := grouptest.State[deliverypb.DeviceDeliveries](h, delivery.Table, "dev-1")
	if q := st.GetQueues(); len(q) != 1 || q[0].GetItems()[0].GetAttempts() != 0 {
		t.Fatalf("queues %v, want one deferred head with no attempt counted", q)
	}
	h.Advance(time.Second)
	h.FireTimers()
	if got := slowOK.ids(); len(got) != 2 {
		t.Fatalf("delivered %v, want the trigger to both subscriptions", got)
	}
}

// deferred is fencestream_delivery_deferred_total{reason="concurrency"} on reg.
func deferred(reg *prometheus.Registry) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "fencestream_delivery_deferred_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == "concurrency" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A subscription disabled or removed while triggers wait for it: they are
// given up with that reason, and its endpoint is not called again.
func TestDisabledOrRemovedWhilePending(t *testing.T) {
	down := newReceiver(t, "s3cret-down", func(_ int, w http.ResponseWriter) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	subs := delivery.NewSubscriptions()
	subs.Put(sub("x", down.url()))
	subs.Put(sub("y", down.url()+"/y"))
	h := start(t, subs, delivery.Breaker(100, time.Minute))
	h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", 1))
	h.Consume(geofence.TopicTriggers, "dev-1", trigger("dev-1", "f-1", 2))
	calls := down.callCount()
	off := sub("x", down.url())
	off.Enabled = false
	subs.Put(off)
	subs.Remove("y")
	h.Advance(time.Minute)
	h.FireTimers()
	if n := down.callCount(); n != calls {
		t.Errorf("endpoint called %d more times after disable and removal", n-calls)
	}
	reasons := map[string]int{}
	for _, r := range grouptest.Drain[deliverypb.DeadDelivery](h, delivery.TopicDead) {
		reasons[r.Value.GetSubscriptionId()+":"+r.Value.GetReason()]++
	}
	if reasons["x:disabled"] != 2 || reasons["y:removed"] != 2 || len(reasons) != 2 {
		t.Errorf("given up %v, want 2 x:disabled and 2 y:removed", reasons)
	}
	if st := grouptest.State[deliverypb.DeviceDeliveries](h, delivery.Table, "dev-1"); st != nil {
		t.Errorf("state left: %v", st)
	}
}
