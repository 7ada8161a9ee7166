package transitions_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
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
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/transitions"
	"github.com/fencestream/fencestream/processors/transitions/transitionspb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// startModule runs the module until the returned stop; it returns once both
// processors are ready.
func startModule(t *testing.T, cl cluster.Config, env host.Env) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	var mu sync.Mutex
	started := 0
	env.Cluster, env.Log = cl, slog.New(slog.DiscardHandler)
	env.Started = func(*group.Processor) {
		mu.Lock()
		defer mu.Unlock()
		if started++; started == 2 {
			close(ready)
		}
	}
	go func() { done <- transitions.Module().Run(ctx, env) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("transitions stopped before ready: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("transitions not ready within a minute")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("transitions: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// On the embedded broker, across a restart on fresh disks: the device's
// history comes back from the table's changelog, so a ping sent before the
// device left, arriving after the restart, still counts inside.
func TestRestartKeepsHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo, err := host.Compose(geofence.Topology(geofence.Partitions(4)), transitions.Module())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(embeddedtest.Client(t, cl))); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour) // event time in the past
	prod := embeddedtest.Client(t, cl)
	send := func(topic string, v []byte) {
		t.Helper()
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("car-1"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	trig := func(typ geofencepb.TriggerType, at time.Duration) {
		v, err := codecs.For[geofencepb.Trigger]().Marshal(&geofencepb.Trigger{TriggerId: fmt.Sprint("car-1|depot|", typ), DeviceId: "car-1", FenceId: "depot", Type: typ, EventTimeMs: t0.Add(at).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		send(geofence.TopicTriggers, v)
	}
	ping := func(at time.Duration) {
		v, err := codecs.For[geofencepb.Ping]().Marshal(&geofencepb.Ping{DeviceId: "car-1", DeviceTimeMs: t0.Add(at).UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		send(geofence.TopicPings, v)
	}
	versions, err := view.New[kitpb.VersionSet](cl, transitions.Table)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, versions)
	presence, err := view.New[transitionspb.PingPresence](cl, transitions.PingsTable)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, presence)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute", what)
			}
		}
	}

	dir := t.TempDir()
	stop := startModule(t, cl, host.Env{Topology: topo, Group: []group.Opt{group.StateDir(filepath.Join(dir, "1"))}})
	trig(geofencepb.TriggerType_TRIGGER_TYPE_ENTER, 0)
	trig(geofencepb.TriggerType_TRIGGER_TYPE_EXIT, time.Hour)
	waitFor("two versions", func() bool { st, err := versions.Get("car-1"); return err == nil && len(st.GetVersions()) == 2 })
	stop()

	startModule(t, cl, host.Env{Topology: topo, Group: []group.Opt{group.StateDir(filepath.Join(dir, "2"))}})
	ping(30 * time.Minute) // sent inside, arriving after the exit and the restart
	ping(90 * time.Minute)
	waitFor("two pings counted", func() bool {
		st, err := presence.Get("car-1")
		return err == nil && st.GetInside()+st.GetOutside()+st.GetUnknown() == 2
	})
	if st, _ := presence.Get("car-1"); st.GetInside() != 1 || st.GetOutside() != 1 || st.GetLastFence() != "depot" {
		t.Fatalf("car-1's pings after the restart: %v", st)
	}
}
