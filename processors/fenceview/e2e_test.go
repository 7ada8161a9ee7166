package fenceview_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

const e2ePartitions = 6

// startBroker starts an embedded broker with the geofence topics.
func startBroker(t *testing.T, ctx context.Context) (cluster.Config, *kgo.Client) {
	t.Helper()
	b := embeddedtest.Start(t)
	cl := cluster.Config{Brokers: b.Addrs(), ClientID: "fenceview-test"}
	kopts, err := cl.Kgo()
	if err != nil {
		t.Fatal(err)
	}
	// franz-go's default partitioner hashes keys with Kafka's murmur2, as
	// the Java client does: the views must find what it writes.
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	if err := geofence.Topology(geofence.Partitions(e2ePartitions)).Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	return cl, kc
}

// produce writes msg under key (a nil msg is a tombstone) and checks that the
// producer put it where the pinned partitioner says.
func produce(t *testing.T, ctx context.Context, kc *kgo.Client, topic, key string, msg protov2.Message, partitions int32) {
	t.Helper()
	var val []byte
	if msg != nil {
		var err error
		if val, err = protov2.Marshal(msg); err != nil {
			t.Fatal(err)
		}
	}
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: val}
	if err := kc.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("producing %s/%s: %v", topic, key, err)
	}
	if want := topology.PartitionFor(key, partitions); r.Partition != want {
		t.Fatalf("%s/%s went to partition %d, pinned partitioner says %d", topic, key, r.Partition, want)
	}
}

// startService runs fenceview.Run on a fresh listener and returns its base
// URL; the service stops (and must stop cleanly) when the test ends.
func startService(t *testing.T, ctx context.Context, cl cluster.Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- fenceview.Run(ctx, cl, l, fenceview.Partitions(e2ePartitions), fenceview.NoCreateTopics(),
			fenceview.Logger(slog.New(slog.DiscardHandler)))
	}()
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

// eventually polls GET url until check accepts status and body.
func eventually(t *testing.T, url, what string, check func(status int, body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
			if check(resp.StatusCode, string(body)) {
				return string(body)
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last answer: %s", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEndToEndOnEmbeddedBroker(t *testing.T) {
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
	produce(t, ctx, kc, geofence.TopicFences, demo[0].ID, nil, 1) // deleted again
	const devices = 40
	for i := range devices {
		id := fmt.Sprintf("vehicle-%03d", i)
		produce(t, ctx, kc, geofence.TopicDebouncer, id, &geofencepb.DeviceState{
			DeviceId: id, LastHlc: uint64(1000 + i), LastEventTimeMs: 1_700_000_000_000 + int64(i), Pings: uint64(i + 1),
			FenceStates: []*geofencepb.FenceEntry{{FenceId: "park-tiergarten", State: &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_INSIDE}}},
		}, e2ePartitions)
	}
	for i, f := range demo[1:] {
		produce(t, ctx, kc, geofence.TopicOccupancy, f.ID, &geofencepb.Occupancy{
			FenceId: f.ID, Count: int64(i), EntersTotal: uint64(2 * i), ExitsTotal: uint64(i),
		}, e2ePartitions)
	}

	// Triggers from before the service started: its history, not its feed.
	for i, dev := range []string{"vehicle-010", "vehicle-011", "vehicle-012"} {
		old := trigger(fmt.Sprintf("%s|park-tiergarten|ENTER|%d", dev, i), dev, "park-tiergarten")
		old.EventTimeMs = 1_700_000_000_000 + int64(i)*1000
		produce(t, ctx, kc, geofence.TopicTriggers, dev, old, e2ePartitions)
	}

	base := startService(t, ctx, cl)
	eventually(t, base+"/readyz", "readiness", func(s int, body string) bool {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Fatalf("/readyz: %d %s", s, body)
		}
		return s == http.StatusOK
	})

	get := func(path string, out any) int {
		t.Helper()
		return (&fixture{}).getBase(t, base, path, out)
	}
	for i := range devices {
		id := fmt.Sprintf("vehicle-%03d", i)
		var d fenceview.DeviceDetail
		if s := get("/v1/devices/"+id, &d); s != http.StatusOK {
			t.Fatalf("%s: status %d: the view did not find a key written with Kafka's partitioner", id, s)
		}
		if d.Pings != uint64(i+1) || d.LastHLC != uint64(1000+i) || d.Partition != topology.PartitionFor(id, e2ePartitions) ||
			len(d.Fences) != 1 || d.Fences[0].Phase != "INSIDE" || d.Fences[0].FenceName == "" {
			t.Fatalf("%s: %+v", id, d)
		}
	}
	if s := get("/v1/devices/vehicle-999", nil); s != http.StatusNotFound {
		t.Fatalf("unknown device: %d", s)
	}

	var l fenceview.FenceList
	get("/v1/fences?sort=count&limit=3", &l)
	if l.Total != len(demo)-1 || len(l.Fences) != 3 || l.Fences[0].ID != demo[len(demo)-1].ID || l.Fences[0].Count != int64(len(demo)-2) {
		t.Fatalf("fences by count: total %d, %+v", l.Total, l.Fences)
	}
	for i, fe := range demo[1:] {
		var d fenceview.FenceDetail
		if s := get("/v1/fences/"+fe.ID, &d); s != http.StatusOK || d.Count != int64(i) || d.EntersTotal != uint64(2*i) || !d.InCatalogue || d.LagRecords == nil {
			t.Fatalf("%s: status %d %+v", fe.ID, s, d)
		}
	}
	if s := get("/v1/fences/"+demo[0].ID, nil); s != http.StatusNotFound {
		t.Fatalf("fence deleted by a tombstone: %d", s)
	}

	// The views follow their tables live.
	produce(t, ctx, kc, geofence.TopicOccupancy, "park-tiergarten", &geofencepb.Occupancy{FenceId: "park-tiergarten", Count: 99, Devices: []string{"late"}}, e2ePartitions)
	eventually(t, base+"/v1/fences/park-tiergarten", "the occupancy update", func(s int, body string) bool {
		return s == http.StatusOK && strings.Contains(body, `"count":99`)
	})

	// The live feed: a trigger produced now reaches an open stream.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	events, _ := openStream(t, sctx, base+"/v1/triggers/stream?fence=station-zoo")
	tr := trigger("vehicle-001|station-zoo|ENTER|77", "vehicle-001", "station-zoo")
	tr.EventTimeMs = time.Now().UnixMilli()
	produce(t, ctx, kc, geofence.TopicTriggers, "vehicle-001", trigger("vehicle-002|park|ENTER|1", "vehicle-002", "park-tiergarten"), e2ePartitions)
	produce(t, ctx, kc, geofence.TopicTriggers, "vehicle-001", tr, e2ePartitions)
	if ev := nextEvent(t, events, "trigger"); ev.id != tr.TriggerId {
		t.Fatalf("stream gave %q, want %q", ev.id, tr.TriggerId)
	}
	scancel()

	// Recent triggers, newest event time first: the live ones, then the
	// history read back from the topic at start-up.
	var recent fenceview.TriggerList
	eventually(t, base+"/v1/triggers?limit=4", "the live triggers in the history", func(s int, body string) bool {
		return s == http.StatusOK && strings.Contains(body, tr.TriggerId)
	})
	get("/v1/triggers?limit=4", &recent)
	var gotIDs []string
	for _, x := range recent.Triggers {
		gotIDs = append(gotIDs, x.TriggerID)
	}
	// vehicle-002's has vehicle-010's event time and came later.
	wantIDs := []string{tr.TriggerId, "vehicle-012|park-tiergarten|ENTER|2", "vehicle-011|park-tiergarten|ENTER|1", "vehicle-002|park|ENTER|1"}
	if strings.Join(gotIDs, " ") != strings.Join(wantIDs, " ") || recent.Limit != 4 {
		t.Fatalf("/v1/triggers?limit=4: %q, want %q", gotIDs, wantIDs)
	}
	get("/v1/triggers?device=vehicle-010", &recent)
	if len(recent.Triggers) != 1 || recent.Triggers[0].DeviceID != "vehicle-010" {
		t.Fatalf("/v1/triggers?device=vehicle-010: %+v", recent.Triggers)
	}

	metrics := eventually(t, base+"/metrics", "metrics", func(s int, _ string) bool { return s == http.StatusOK })
	for _, want := range []string{
		`fencestream_view_recovered{table="debouncer-table"} 1`,
		`fencestream_view_recovered{table="occupancy-table"} 1`,
		`fencestream_view_lag_records{partition="0",table="occupancy-table"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, name := range []string{"fencestream_trigger_processing_latency_seconds", "fencestream_trigger_event_lag_seconds"} {
		m := regexp.MustCompile(`(?m)^` + name + `_count (\d+)$`).FindStringSubmatch(metrics)
		if len(m) < 2 {
			t.Errorf("/metrics lacks %s_count", name)
		} else if n, _ := strconv.Atoi(m[1]); n < 2 {
			t.Errorf("%s counted %d triggers, want >= 2", name, n)
		}
	}
}
