package visits_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/visits"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// startVisits runs visits.Run until the returned stop is called; it returns
// once both processors are ready.
func startVisits(t *testing.T, cl cluster.Config, topo *topology.Topology, dir string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		done <- visits.Run(ctx, host.Env{Cluster: cl, Topology: topo, Log: slog.New(slog.DiscardHandler),
			Group:   []group.Opt{group.StateDir(dir), group.TimerInterval(100 * time.Millisecond)},
			Started: func(*group.Processor) { once.Do(func() { close(ready) }) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("visits stopped before ready: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("visits not ready within a minute")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("visits: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// A restart in the middle: an ENTER applied before the restart pairs with an
// EXIT after it, and the window timer set before the restart (it lives in the
// table) closes the hour after it, once stream time passes end + grace.
func TestRestartInTheMiddle(t *testing.T) {
	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology(geofence.Partitions(4))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(embeddedtest.Client(t, cl))); err != nil {
		t.Fatal(err)
	}
	// Event time two days back: stream time never runs ahead of the wall clock.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicTriggers))
	codec := codecs.For[geofencepb.Trigger]()
	send := func(device, fence string, typ geofencepb.TriggerType, at time.Duration) {
		t.Helper()
		v, err := codec.Marshal(&geofencepb.Trigger{TriggerId: fmt.Sprintf("%s|%s|%d|%d", device, fence, typ, at.Milliseconds()),
			DeviceId: device, FenceId: fence, Type: typ, Reason: geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED, EventTimeMs: t0.Add(at).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(device), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tv, err := view.New[visitspb.FenceVisits](cl, geofence.TopicVisitStatsTable)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, tv)
	hours := func(fence string) string {
		st, err := tv.Get(fence)
		if err != nil || st == nil {
			return fmt.Sprint(err)
		}
		hs, err := visits.Hours(st)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hs {
			out = append(out, fmt.Sprintf("+%s e=%d v=%d final=%v", h.Start.Sub(t0), h.Enters, h.Visits, h.Final))
		}
		return strings.Join(out, " | ")
	}
	waitHours := func(fence, want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for got := hours(fence); got != want; got = hours(fence) {
			if time.Now().After(deadline) {
				t.Fatalf("%s hours %q, want %q", fence, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	dir := t.TempDir()
	stop := startVisits(t, cl, topo, dir)
	send("car-1", "depot", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 5*time.Minute)
	send("car-2", "depot", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 20*time.Minute)
	waitHours("depot", "+0s e=2 v=0 final=false")
	stop()

	startVisits(t, cl, topo, dir)
	send("car-1", "depot", geofencepb.TriggerType_TRIGGER_TYPE_EXIT, 50*time.Minute)
	recs := embeddedtest.ConsumeUntil(t, cl, geofence.TopicVisits, func(r []*kgo.Record) bool { return len(r) >= 1 })
	vis, err := codecs.For[visitspb.Visit]().Unmarshal(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if string(recs[0].Key) != "car-1" || vis.GetEnteredMs() != t0.Add(5*time.Minute).UnixMilli() || vis.GetDurationMs() != (45*time.Minute).Milliseconds() {
		t.Fatalf("visit after restart: key %s %v", recs[0].Key, vis)
	}
	waitHours("depot", "+0s e=2 v=1 final=false")
	// Stream time of the fence's partition passes 01:10 (end + grace) only
	// with a later record on that partition: send ENTERs to fences until one
	// shares depot's partition.
	for i := 0; ; i++ {
		fence := fmt.Sprintf("yard-%d", i)
		if topology.PartitionFor(fence, 4) == topology.PartitionFor("depot", 4) {
			send("car-9", fence, geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 71*time.Minute)
			break
		}
	}
	waitHours("depot", "+0s e=2 v=1 final=true")
	// Exactly one visit, whatever the restart redelivered.
	recs = embeddedtest.ConsumeUntil(t, cl, geofence.TopicVisits, func(r []*kgo.Record) bool { return len(r) >= 1 })
	if len(recs) != 1 {
		t.Fatalf("%d visits on %s, want 1", len(recs), geofence.TopicVisits)
	}
}
