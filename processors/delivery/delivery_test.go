package delivery_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
)

var base = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

func trigger(device, fence string, n int) *geofencepb.Trigger {
	return &geofencepb.Trigger{TriggerId: fmt.Sprintf("%s|%s|ENTER|%d", device, fence, n), DeviceId: device, FenceId: fence,
		Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER, EventTimeMs: base.Add(time.Duration(n) * time.Second).UnixMilli(), Hlc: uint64(n)}
}

func sub(id, url string, fences ...string) *deliverypb.Subscription {
	return &deliverypb.Subscription{Id: id, Url: url, Secret: "s3cret-" + id, FenceIds: fences, Enabled: true}
}

// start runs both groups on one tester; the harness clock is the
// processor's wall clock, so retries wait for Advance.
func start(t *testing.T, subs *delivery.Subscriptions, opts ...delivery.Opt) *grouptest.Harness {
	t.Helper()
	return startOn(t, nil, subs, opts...)
}

// startOn is start with the metrics on reg.
func startOn(t *testing.T, reg prometheus.Registerer, subs *delivery.Subscriptions, opts ...delivery.Opt) *grouptest.Harness {
	t.Helper()
	topo, err := host.Compose(geofence.Topology(), delivery.Module())
	if err != nil {
		t.Fatal(err)
	}
	h := grouptest.New(t, base.Add(time.Hour))
	gs, err := delivery.New(topo, nil, reg, append([]delivery.Opt{delivery.SharedSubscriptions(subs), delivery.Now(h.Now),
		delivery.Backoff(time.Second, 10*time.Second), delivery.AttemptTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h.Start(gs.Deliveries)
	h.Start(gs.Status)
	return h
}

func status(h *grouptest.Harness, id string) *deliverypb.SubscriptionStatus {
	return grouptest.State[deliverypb.SubscriptionStatus](h, delivery.StatusTable, id)
}

// Each matching trigger reaches each subscription signed, once, in device
// order; a 500 with Retry-After holds the device's later triggers for that
// subscription only, until a retry the wall clock (not the data) makes due;
// a 410 disables its subscription and gives up its queue; filters and
// disabled subscriptions get nothing.
func TestDeliversInOrderRetriesAndDisablesOnGone(t *testing.T) {
	healthy := newReceiver(t, "s3cret-healthy", nil)
	flaky := newReceiver(t, "s3cret-flaky", func(call int, w http.ResponseWriter) bool {
		if call <= 2 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusInternalServerError)
			return false
		}
		return true
	})
	gone := newReceiver(t, "s3cret-gone", func(_ int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusGone); return false })
	other := newReceiver(t, "s3cret-other", nil)
	off := newReceiver(t, "s3cret-off", nil)
	subs := delivery.NewSubscriptions()
	subs.Put(sub("healthy", healthy.url()))
	subs.Put(sub("flaky", flaky.url(), "f-1"))
	subs.Put(sub("gone", gone.url()))
	subs.Put(sub("other", other.url(), "f-2"))
	disabled := sub("off", off.url())
	disabled.Enabled = false
	subs.Put(disabled)
	h := start(t, subs)

	want := []string{}
	for n := 1; n <= 3; n++ {
		tr := trigger("dev-1", "f-1", n)
		want = append(want, tr.TriggerId)
		h.Consume(geofence.TopicTriggers, "dev-1", tr)
	}
	if got := healthy.ids(); !slices.Equal(got, want) {
		t.Fatalf("healthy got %v, want %v", got, want)
	}
	if n := flaky.callCount(); n != 1 {
		t.Fatalf("flaky was called %d times before any retry, want 1 (later triggers wait behind the first)", n)
	}
	// Retry-After 3 s beats the 1 s backoff: nothing at +2 s.
	h.Advance(2 * time.Second)
	h.FireTimers()
	if n := flaky.callCount(); n != 1 {
		t.Fatalf("flaky was retried before its Retry-After: %d calls", n)
	}
	for i := 0; i < 2; i++ {
		h.Advance(4 * time.Second)
		h.FireTimers()
	}
	if got := flaky.ids(); !slices.Equal(got, want) {
		t.Fatalf("flaky got %v after recovering, want %v (calls %d)", got, want, flaky.callCount())
	}
	for _, r := range []*receiver{healthy, flaky} {
		if p := r.problems(); len(p) > 0 {
			t.Errorf("receiver problems: %v", p)
		}
	}
	if n := other.callCount() + off.callCount(); n != 0 {
		t.Errorf("a filtered-out or disabled subscription was called %d times", n)
	}
	if n := gone.callCount(); n != 1 {
		t.Errorf("the 410 endpoint was called %d times, want 1 (its subscription is disabled at once)", n)
	}
	if s := subs.Get("gone"); s.GetEnabled() {
		t.Errorf("subscription gone still enabled after 410")
	}
	var written []*deliverypb.Subscription
	for _, r := range grouptest.Drain[deliverypb.Subscription](h, delivery.TopicSubscriptions) {
		written = append(written, r.Value)
	}
	if len(written) != 1 || written[0].GetId() != "gone" || written[0].GetEnabled() {
		t.Errorf("subscriptions written: %v, want gone disabled", written)
	}
	dead := grouptest.Drain[deliverypb.DeadDelivery](h, delivery.TopicDead)
	if len(dead) != 1 || dead[0].Value.GetReason() != "gone" || dead[0].Value.GetTrigger().GetTriggerId() != want[0] {
		t.Errorf("dead letters %v, want the first trigger for gone", dead)
	}
	if s := status(h, "healthy"); s.GetDelivered() != 3 || s.GetPending() != 0 || s.GetLastSuccessMs() == 0 {
		t.Errorf("healthy status %v", s)
	}
	if s := status(h, "flaky"); s.GetDelivered() != 3 || s.GetFailedAttempts() != 2 || s.GetPending() != 0 || s.GetLastError() == "" {
		t.Errorf("flaky status %v", s)
	}
	if s := status(h, "gone"); s.GetDead() != 1 || s.GetPending() != 0 {
		t.Errorf("gone status %v", s)
	}
	if st := grouptest.State[deliverypb.DeviceDeliveries](h, delivery.Table, "dev-1"); st != nil {
		t.Errorf("device state left after every delivery: %v", st)
	}
}
