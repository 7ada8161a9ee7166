package fenceview_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology/cluster"
)

// fakeSubs is a SubscriptionStore in memory that records every write.
type fakeSubs struct {
	mu     sync.Mutex
	writes []*deliverypb.Subscription // nil: a tombstone
	byID   map[string]*deliverypb.Subscription
}

func (f *fakeSubs) Write(_ context.Context, id string, sub *deliverypb.Subscription) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, sub)
	if f.byID == nil {
		f.byID = map[string]*deliverypb.Subscription{}
	}
	if sub == nil {
		delete(f.byID, id)
	} else {
		f.byID[id] = sub
	}
	return nil
}

func (f *fakeSubs) Current(_ context.Context, id string) (*deliverypb.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byID[id], nil
}

func (f *fakeSubs) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// send makes a request and returns its status, Allow header and body.
func send(t *testing.T, method, url, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Allow"), string(b)
}

const goodSub = `{"url":"https://hooks.example.com/in","secret":"s3cret-value","fence_ids":["park-tiergarten"],"fence_tags":["parks"],"device_groups":["fleet-a"],"types":["enter","dwell"]}`

func TestSubscriptionWritesOffByDefault(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/subscriptions/s1", goodSub},
		{http.MethodDelete, "/v1/subscriptions/s1", ""},
		{http.MethodPost, "/v1/subscriptions/s1/disable", ""},
	} {
		status, allow, body := send(t, c.method, f.srv.URL+c.path, c.body)
		if status != http.StatusMethodNotAllowed || allow != "GET, HEAD" || !strings.Contains(body, fenceview.SubscriptionWritesFlag) {
			t.Errorf("%s %s with writes off: %d Allow %q %s; want 405, Allow GET, HEAD, naming %s", c.method, c.path, status, allow, body, fenceview.SubscriptionWritesFlag)
		}
	}
	// The other routes keep their read-only answer.
	status, allow, body := send(t, http.MethodPost, f.srv.URL+"/v1/fences", "")
	if status != http.StatusMethodNotAllowed || allow != "GET, HEAD" || !strings.Contains(body, "read-only") {
		t.Errorf("POST /v1/fences: %d Allow %q %s", status, allow, body)
	}
}

func TestSubscriptionPut(t *testing.T) {
	st := &fakeSubs{}
	f := newFixture(t, fenceview.SubscriptionWrites(st))
	status, _, body := send(t, http.MethodPut, f.srv.URL+"/v1/subscriptions/s1", goodSub)
	if status != http.StatusOK {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if strings.Contains(body, "s3cret-value") || strings.Contains(body, "secret") {
		t.Errorf("PUT answer shows the secret: %s", body)
	}
	var got fenceview.SubscriptionJSON
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.ID != "s1" || !got.Enabled || strings.Join(got.Types, ",") != "enter,dwell" {
		t.Errorf("PUT answer %s (err %v)", body, err)
	}
	sub, _ := st.Current(context.Background(), "s1")
	if sub == nil || sub.GetSecret() != "s3cret-value" || sub.GetUrl() != "https://hooks.example.com/in" || !sub.GetEnabled() ||
		len(sub.GetTypes()) != 2 || sub.GetTypes()[1] != geofencepb.TriggerType_TRIGGER_TYPE_DWELL || sub.GetDeviceGroups()[0] != "fleet-a" {
		t.Fatalf("stored %v", sub)
	}
	status, _, body = send(t, http.MethodPost, f.srv.URL+"/v1/subscriptions/s1/disable", "")
	if sub, _ := st.Current(context.Background(), "s1"); status != http.StatusOK || sub.GetEnabled() || sub.GetSecret() != "s3cret-value" || strings.Contains(body, "s3cret") {
		t.Errorf("disable: %d %s, stored %v", status, body, sub)
	}
	// A browser's cross-site request (a form on another site) is refused.
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/subscriptions/s1/disable", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site disable: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	if status, _, body := send(t, http.MethodPost, f.srv.URL+"/v1/subscriptions/nope/disable", ""); status != http.StatusNotFound {
		t.Errorf("disable of an unknown id: %d %s", status, body)
	}
	n := st.count()
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `{`, "body"},
		{"unknown field", `{"url":"https://x.example","secret":"s","colour":"red"}`, "colour"},
		{"two values", `{"url":"https://x.example","secret":"s"} {}`, "more than one"},
		{"bad url", `{"url":"ftp://x.example","secret":"s"}`, "url must be"},
		{"no secret", `{"url":"https://x.example"}`, "secret is required"},
		{"bad type", `{"url":"https://x.example","secret":"s","types":["enter","teleport"]}`, "teleport"},
		{"empty tag", `{"url":"https://x.example","secret":"s","fence_tags":[""]}`, "fence tag"},
	} {
		status, _, body := send(t, http.MethodPut, f.srv.URL+"/v1/subscriptions/s2", c.body)
		if status != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", c.name, status, body, c.want)
		}
	}
	big := `{"url":"https://x.example","secret":"` + strings.Repeat("x", fenceview.MaxSubscriptionBody) + `"}`
	if status, _, body := send(t, http.MethodPut, f.srv.URL+"/v1/subscriptions/s2", big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %d %.200s", status, body)
	}
	if st.count() != n {
		t.Errorf("refused PUTs wrote %d records", st.count()-n)
	}
	if status, _, body := send(t, http.MethodDelete, f.srv.URL+"/v1/subscriptions/s1", ""); status != http.StatusOK {
		t.Errorf("DELETE: %d %s", status, body)
	}
	if sub, _ := st.Current(context.Background(), "s1"); sub != nil || st.writes[len(st.writes)-1] != nil {
		t.Errorf("DELETE wrote %v, want a tombstone", st.writes[len(st.writes)-1])
	}
}

// readSubscription reads the subscriptions topic to the last record of id
// written: its value (nil for a tombstone) and whether there was one.
func readSubscription(t *testing.T, ctx context.Context, cl cluster.Config, id string, after int64) (*kgo.Record, bool) {
	t.Helper()
	kopts, err := cl.Kgo()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(delivery.TopicSubscriptions), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fetches := kc.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, false
		}
		var last *kgo.Record
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == id && r.Offset >= after {
				last = r
			}
		})
		if last != nil {
			return last, true
		}
	}
}

func TestSubscriptionWritesOnBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, _ := startBroker(t, ctx)
	mod := delivery.Module()
	topo, err := host.Compose(geofence.Topology(geofence.Partitions(e2ePartitions)), mod)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fenceview.Run(rctx, cl, l, fenceview.Partitions(e2ePartitions), fenceview.Topology(topo),
			fenceview.ModuleRoutes(host.Routes(mod)...), fenceview.WritableSubscriptions(), fenceview.Registerer(prometheus.NewRegistry()), fenceview.Logger(slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of its context ending")
		}
	})
	base := "http://" + l.Addr().String()
	eventually(t, base+"/readyz", "fenceview ready", func(status int, _ string) bool { return status == http.StatusOK })

	status, _, body := send(t, http.MethodPut, base+"/v1/subscriptions/hook-1", goodSub)
	if status != http.StatusOK {
		t.Fatalf("PUT: %d %s", status, body)
	}
	r, ok := readSubscription(t, ctx, cl, "hook-1", 0)
	if !ok {
		t.Fatal("the PUT wrote no record to the subscriptions topic")
	}
	sub, err := codecs.For[deliverypb.Subscription]().Unmarshal(r.Value)
	if err != nil || sub.GetId() != "hook-1" || sub.GetSecret() != "s3cret-value" || !sub.GetEnabled() || delivery.Validate(sub) != nil {
		t.Fatalf("record read back: %v (err %v)", sub, err)
	}
	// The delivery module's status route still answers GET, never with the secret.
	status, _, body = send(t, http.MethodGet, base+"/v1/subscriptions/hook-1", "")
	if (status != http.StatusOK && status != http.StatusNotFound) || strings.Contains(body, "s3cret") {
		t.Errorf("GET /v1/subscriptions/hook-1: %d %s", status, body)
	}
	if status, _, body := send(t, http.MethodPost, base+"/v1/subscriptions/hook-1/disable", ""); status != http.StatusOK {
		t.Fatalf("disable: %d %s", status, body)
	}
	r, ok = readSubscription(t, ctx, cl, "hook-1", r.Offset+1)
	if !ok {
		t.Fatal("disable wrote no record")
	}
	if sub, err := codecs.For[deliverypb.Subscription]().Unmarshal(r.Value); err != nil || sub.GetEnabled() || sub.GetSecret() != "s3cret-value" {
		t.Fatalf("disabled record: %v (err %v)", sub, err)
	}
	if status, _, body := send(t, http.MethodDelete, base+"/v1/subscriptions/hook-1", ""); status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	r, ok = readSubscription(t, ctx, cl, "hook-1", r.Offset+1)
	if !ok || r.Value != nil {
		t.Fatalf("DELETE: record %v (found %v), want a tombstone", r, ok)
	}
	if status, _, body := send(t, http.MethodPost, base+"/v1/subscriptions/hook-1/disable", ""); status != http.StatusNotFound {
		t.Errorf("disable after DELETE: %d %s, want 404", status, body)
	}
}
