package fenceview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// runWith runs fenceview.Run with o on l until the test ends.
func runWith(t *testing.T, ctx context.Context, cl cluster.Config, l net.Listener, opts ...fenceview.Opt) string {
	t.Helper()
	opts = append([]fenceview.Opt{fenceview.Partitions(e2ePartitions), fenceview.NoCreateTopics(), fenceview.Logger(slog.New(slog.DiscardHandler))}, opts...)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fenceview.Run(ctx, cl, l, opts...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of its context ending")
		}
	})
	return "http://" + l.Addr().String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// body GETs url and returns the status and the body with the fields that
// describe the answering replica's own copy (lag) removed.
func body(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v: %s", url, err, b)
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "lag_records")
	}
	out, _ := json.Marshal(v)
	return resp.StatusCode, string(out)
}

// TestShardedReplicas: two replicas each hold half of the partitions; every
// device and fence is answered by either with the same JSON as a replica
// holding everything, fence listings and split fences (salted parts on both
// halves) merged from both.
func TestShardedReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, kc := startBroker(t, ctx)
	demo := fences.Demo()
	for i := range demo {
		pb, err := demo[i].ToProto()
		if err != nil {
			t.Fatal(err)
		}
		produce(t, ctx, kc, geofence.TopicFences, demo[i].ID, pb, 1)
	}
	const devices = 60
	for i := range devices {
		id := fmt.Sprintf("vehicle-%03d", i)
		produce(t, ctx, kc, geofence.TopicDebouncer, id, &geofencepb.DeviceState{
			DeviceId: id, LastHlc: uint64(1000 + i), Pings: uint64(i + 1),
			FenceStates: []*geofencepb.FenceEntry{{FenceId: demo[0].ID, State: &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_INSIDE}}},
		}, e2ePartitions)
	}
	for i, f := range demo[1:] {
		produce(t, ctx, kc, geofence.TopicOccupancy, f.ID, &geofencepb.Occupancy{FenceId: f.ID, Count: int64(i), EntersTotal: uint64(2 * i)}, e2ePartitions)
	}
	// demo[0] split into salted parts, which land on both halves.
	big := demo[0].ID
	in := &geofencepb.Member{Inside: true}
	produce(t, ctx, kc, geofence.TopicOccupancy, big, &geofencepb.Occupancy{FenceId: big, Count: 1, SaltBuckets: 32, EntersTotal: 1,
		Members: map[string]*geofencepb.Member{"a": in}}, e2ePartitions)
	halves := map[bool]int{}
	for part := range 32 {
		key := fmt.Sprintf("%s#%d", big, part)
		halves[topology.PartitionFor(key, e2ePartitions) < e2ePartitions/2]++
		produce(t, ctx, kc, geofence.TopicOccupancy, key, &geofencepb.Occupancy{FenceId: big, Count: 1, EntersTotal: 1,
			Members: map[string]*geofencepb.Member{fmt.Sprintf("p%02d", part): in}}, e2ePartitions)
	}
	if halves[true] == 0 || halves[false] == 0 {
		t.Fatalf("salted parts all on one half: %v", halves)
	}

	l0, l1, lf := listen(t), listen(t), listen(t)
	peers := "http://" + l0.Addr().String() + ",http://" + l1.Addr().String()
	var bases []string
	for i, l := range []net.Listener{l0, l1} {
		own, err := fenceview.ReplicaPartitions(i, 2, e2ePartitions)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := fenceview.ParsePeers(peers, i, 2, e2ePartitions, own)
		if err != nil {
			t.Fatal(err)
		}
		bases = append(bases, runWith(t, ctx, cl, l, fenceview.StateDir(t.TempDir()), fenceview.Sharding(&fenceview.Shard{Partitions: own, Peers: ps})))
	}
	full := runWith(t, ctx, cl, lf)
	for _, b := range append([]string{full}, bases...) {
		eventually(t, b+"/readyz", "readiness of "+b, func(s int, _ string) bool { return s == http.StatusOK })
	}

	same := func(path string, wantStatus int) string {
		t.Helper()
		ws, want := body(t, full+path)
		if ws != wantStatus {
			t.Fatalf("full replica %s: %d %s", path, ws, want)
		}
		for i, b := range bases {
			if s, got := body(t, b+path); s != ws || got != want {
				t.Fatalf("replica %d %s: %d %s\nfull replica: %d %s", i, path, s, got, ws, want)
			}
		}
		return want
	}
	for i := range devices {
		same(fmt.Sprintf("/v1/devices/vehicle-%03d", i), http.StatusOK)
	}
	same("/v1/devices/vehicle-999", http.StatusNotFound)
	for _, f := range demo {
		same("/v1/fences/"+f.ID, http.StatusOK)
	}
	list := same("/v1/fences?sort=count", http.StatusOK)
	if !strings.Contains(list, fmt.Sprintf(`"count":%d`, 33)) { // big: 1 + 32 parts
		t.Fatalf("split fence not summed over both halves: %s", list)
	}
	same("/v1/fences?sort=id&limit=2&offset=1", http.StatusOK)

	// A replica serves only what it holds.
	resp, err := http.Get(bases[0] + "/v1/internal/records/" + geofence.TopicDebouncer + "?partitions=" + fmt.Sprint(e2ePartitions-1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("records of a partition not held: %d", resp.StatusCode)
	}
}

func TestShardFlags(t *testing.T) {
	ps, err := fenceview.ParsePartitions("0-2, 5,4,9-9")
	if err != nil || !slices.Equal(ps, []int32{0, 1, 2, 4, 5, 9}) || fenceview.FormatPartitions(ps) != "0-2,4-5,9" {
		t.Fatalf("ParsePartitions: %v %v", ps, err)
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1-"} {
		if _, err := fenceview.ParsePartitions(bad); err == nil {
			t.Errorf("ParsePartitions(%q) accepted", bad)
		}
	}
	own, err := fenceview.ReplicaPartitions(1, 2, 24)
	if err != nil || fenceview.FormatPartitions(own) != "12-23" {
		t.Fatalf("replica 1 of 2: %v %v", own, err)
	}
	if p, _ := fenceview.ReplicaPartitions(2, 3, 24); fenceview.FormatPartitions(p) != "16-23" {
		t.Fatalf("replica 2 of 3: %v", p)
	}
	peers, err := fenceview.ParsePeers("http://a:1,http://b:2", 1, 2, 24, own)
	if err != nil || len(peers) != 1 || peers[0].URL != "http://a:1" || fenceview.FormatPartitions(peers[0].Partitions) != "0-11" {
		t.Fatalf("peers by index: %+v %v", peers, err)
	}
	own = []int32{0, 1, 2, 3}
	peers, err = fenceview.ParsePeers("0-3=http://self:1,4,6-23=http://b:2/,5=http://c:3", -1, 0, 24, own)
	if err != nil || len(peers) != 2 || peers[0].URL != "http://b:2" || fenceview.FormatPartitions(peers[0].Partitions) != "4,6-23" {
		t.Fatalf("peers by partitions: %+v %v", peers, err)
	}
	if err := (&fenceview.Shard{Partitions: own, Peers: peers}).Validate(24); err != nil {
		t.Fatal(err)
	}
	for name, sh := range map[string]fenceview.Shard{
		"gap":     {Partitions: own, Peers: peers[:1]},
		"overlap": {Partitions: []int32{0, 1, 2, 3, 4}, Peers: peers},
		"range":   {Partitions: []int32{0, 24}},
		"bad url": {Partitions: own, Peers: []fenceview.Peer{{URL: "b:2", Partitions: []int32{5}}}},
	} {
		if err := sh.Validate(24); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := fenceview.ParsePeers("http://a:1", 0, 2, 24, nil); err == nil {
		t.Error("one URL for two replicas accepted")
	}
}
