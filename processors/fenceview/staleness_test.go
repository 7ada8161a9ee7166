package fenceview_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
)

// TestStaleViewsSayHowOld: the broker goes away under a ready fenceview.
// Every answer carries the age of its data (X-Data-Age-Seconds, and
// data_age_seconds in /readyz); once the age passes MaxStaleness, /readyz
// answers 503 saying how old the data is (on main it stayed ready, serving
// the stale copy without a word); after the broker is back, it is ready
// again with fresh data.
func TestStaleViewsSayHowOld(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bdir := t.TempDir()
	l0, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l0.Addr().(*net.TCPAddr).Port
	l0.Close()
	start := func() *embedded.Broker {
		b, err := embedded.Start(embedded.DataDir(bdir), embedded.Port(port))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start()
	defer func() { b.Close() }()
	cl := cluster.Config{Brokers: b.Addrs(), ClientID: "fenceview-test"}
	kc, err := kgo.NewClient(kgo.SeedBrokers(cl.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	err = geofence.Topology(geofence.Partitions(e2ePartitions)).Ensure(ctx, kadm.NewClient(kc))
	kc.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const bound = 3 * time.Second
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fenceview.Run(runCtx, cl, l, fenceview.Partitions(e2ePartitions), fenceview.NoCreateTopics(),
			fenceview.MaxStaleness(bound), fenceview.Logger(slog.New(slog.DiscardHandler)))
	}()
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("fenceview did not stop")
		}
	}()
	base := "http://" + l.Addr().String()
	type answer struct {
		status int
		age    float64
		hasAge bool
		body   string
	}
	get := func(path string) answer {
		resp, err := http.Get(base + path)
		if err != nil {
			return answer{body: err.Error()}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, body: string(body)}
		if h := resp.Header.Get(fenceview.DataAgeHeader); h != "" {
			a.age, _ = strconv.ParseFloat(h, 64)
			a.hasAge = true
		}
		return a
	}
	waitFor := func(what string, within time.Duration, ok func(answer) bool) answer {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			a := get("/readyz")
			if ok(a) {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; last /readyz: %d %s (age header %v %v)", what, within, a.status, a.body, a.hasAge, a.age)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a := waitFor("ready with a known age", time.Minute, func(a answer) bool { return a.status == http.StatusOK && a.hasAge })
	var body struct {
		Age *float64 `json:"data_age_seconds"`
	}
	if err := json.Unmarshal([]byte(a.body), &body); err != nil || body.Age == nil || *body.Age > bound.Seconds() {
		t.Fatalf("/readyz body %s: want data_age_seconds under %v", a.body, bound)
	}
	if f := get("/v1/fences/none"); !f.hasAge {
		t.Fatalf("a read carries no %s: %d %s", fenceview.DataAgeHeader, f.status, f.body)
	}

	b.Close()
	gone := time.Now()
	a = waitFor("not ready once the data is older than the bound", time.Minute, func(a answer) bool { return a.status == http.StatusServiceUnavailable })
	if !strings.Contains(a.body, "old, over the "+bound.String()+" bound") || !a.hasAge || a.age < bound.Seconds() {
		t.Fatalf("/readyz with the broker gone %v: %d %s (age %v); want the age and the bound", time.Since(gone), a.status, a.body, a.age)
	}
	t.Logf("broker gone for %v: %s", time.Since(gone).Round(time.Millisecond), a.body)

	b = start()
	waitFor("ready again with fresh data after the broker is back", 2*time.Minute, func(a answer) bool {
		return a.status == http.StatusOK && a.hasAge && a.age < bound.Seconds()
	})
}
