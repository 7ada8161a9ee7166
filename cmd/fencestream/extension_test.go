package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// A module outside the framework (processors/devicestats imports only the
// public kit) is listed in processors/modules and nothing else changes: the
// all-in-one runner declares its topic, runs it on the simulated fleet's pings,
// and fenceview shows it in /v1/topology and serves its route.
func TestLinkedModuleRunsInTheAllInOne(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	data := t.TempDir() // before the cleanup below, so it is removed after the runner stops
	ctx, cancel := context.WithCancel(context.Background())
	out := &embeddedtest.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--data", data, "--listen", "127.0.0.1:0", "--broker-port", "0", "--devices", "20", "--partitions", "6"}, out, out)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit code %d\n%s", code, tail(out.String(), 40))
			}
		case <-time.After(time.Minute):
			t.Error("the runner did not stop within a minute")
		}
	})
	deadline := time.Now().Add(startDeadline)
	var url string
	for url == "" {
		if m := reURL.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no URL printed:\n%s", tail(out.String(), 40))
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(strings.TrimSuffix(url, "/") + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		code, body := get("/v1/topology")
		if code == http.StatusOK {
			if !strings.Contains(body, devicestats.Table) || !strings.Contains(body, devicestats.Group) {
				t.Fatalf("/v1/topology lacks the registered processor:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/topology: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The simulator's devices are counted by the registered processor and
	// served through its registered route.
	for {
		code, body := get("/v1/devicestats/veh-0001")
		if code == http.StatusOK {
			var got struct {
				Device string `json:"device"`
				Pings  uint64 `json:"pings"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Device != "veh-0001" || got.Pings == 0 {
				t.Fatalf("route answered %s (%v)", body, err)
			}
			break
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("/v1/devicestats/veh-0001: %d %s\n%s", code, body, tail(out.String(), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
