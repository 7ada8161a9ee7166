package group_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

const (
	viewTable = "vt-table"
	viewParts = 4
)

type deviceView = group.View[testpb.DeviceState, *testpb.DeviceState]

// viewBroker starts a broker with a compacted table topic.
func viewBroker(t *testing.T) (cluster.Config, *kgo.Client) {
	t.Helper()
	cl := embeddedtest.Cluster(t)
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cleanup := "compact"
	resp, err := kadm.NewClient(kc).CreateTopic(ctx, viewParts, 1, map[string]*string{"cleanup.policy": &cleanup}, viewTable)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return cl, kc
}

// produceDevices writes devices from..to-1 (pings = i) to the table.
func produceDevices(t *testing.T, kc *kgo.Client, from, to int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		v, err := protov2.Marshal(&testpb.DeviceState{DeviceId: fmt.Sprintf("dev-%d", i), Pings: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: viewTable, Key: []byte(fmt.Sprintf("dev-%d", i)), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runView starts v and waits until it has recovered; stop ends it.
func runView(t *testing.T, v *deviceView) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := v.WaitRecovered(wctx); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// recordsRead is how many changelog records the view has read since it started.
func recordsRead(v *deviceView) int {
	st := v.Stats(context.Background())
	n := 0
	for _, ts := range st.Partitions {
		if ts != nil && ts.Input != nil {
			n += int(ts.Input.Count)
		}
	}
	return n
}

// waitRead waits until the view has read want records (a view can be
// recovered a moment before its last read counts).
func waitRead(t *testing.T, v *deviceView, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for recordsRead(v) < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := recordsRead(v); got != want {
		t.Fatalf("records read: %d, want %d", got, want)
	}
}

func checkDevices(t *testing.T, v *deviceView, keys []int) {
	t.Helper()
	for _, i := range keys {
		st, err := v.Get(fmt.Sprintf("dev-%d", i))
		if err != nil || st.GetPings() != uint64(i) {
			t.Fatalf("dev-%d: %v, %v", i, st, err)
		}
	}
}

// TestViewRestartIsWarm: a view with a state directory reads the whole table
// once; started again on the same directory it reads nothing it already has,
// only what was written meanwhile — for Goka's full view and the kit's partial
// view alike, and across the two (they keep the same store layout).
func TestViewRestartIsWarm(t *testing.T) {
	const n, more = 400, 25
	cl, kc := viewBroker(t)
	produceDevices(t, kc, 0, n)
	all := []int32{0, 1, 2, 3}
	cases := []struct {
		name        string
		first, next []group.ViewOpt
	}{
		{"goka view", nil, nil},
		{"partial view", []group.ViewOpt{group.ViewPartitions(all...)}, []group.ViewOpt{group.ViewPartitions(all...)}},
		{"goka then partial", nil, []group.ViewOpt{group.ViewPartitions(all...)}},
	}
	written := n
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v1, err := group.NewView[testpb.DeviceState](cl, viewTable, append([]group.ViewOpt{group.ViewStateDir(dir)}, tc.first...)...)
			if err != nil {
				t.Fatal(err)
			}
			stop := runView(t, v1)
			waitRead(t, v1, written)
			checkDevices(t, v1, []int{0, 7, n - 1})
			stop()

			produceDevices(t, kc, written, written+more)
			written += more
			v2, err := group.NewView[testpb.DeviceState](cl, viewTable, append([]group.ViewOpt{group.ViewStateDir(dir)}, tc.next...)...)
			if err != nil {
				t.Fatal(err)
			}
			runView(t, v2)
			waitRead(t, v2, more) // warm: only the records written while it was down
			checkDevices(t, v2, []int{0, 7, n - 1, written - 1})
		})
	}
}

// TestViewWithoutStateDirRebuilds: without a state directory every start
// reads the whole table (the in-memory default).
func TestViewWithoutStateDirRebuilds(t *testing.T) {
	const n = 200
	cl, kc := viewBroker(t)
	produceDevices(t, kc, 0, n)
	for range 2 {
		v, err := group.NewView[testpb.DeviceState](cl, viewTable)
		if err != nil {
			t.Fatal(err)
		}
		stop := runView(t, v)
		waitRead(t, v, n)
		stop()
	}
}

// TestPartialViewHoldsItsPartitions: a partial view answers the keys of its
// partitions, refuses the others with a NotHeldError naming the partition,
// and Each visits only its own.
func TestPartialViewHoldsItsPartitions(t *testing.T) {
	const n = 200
	cl, kc := viewBroker(t)
	produceDevices(t, kc, 0, n)
	v, err := group.NewView[testpb.DeviceState](cl, viewTable, group.ViewPartitions(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	runView(t, v)
	held := 0
	for i := range n {
		key := fmt.Sprintf("dev-%d", i)
		p := topology.PartitionFor(key, viewParts)
		st, err := v.Get(key)
		var nh *group.NotHeldError
		switch {
		case p == 1 || p == 3:
			held++
			if err != nil || st.GetPings() != uint64(i) {
				t.Fatalf("%s on held partition %d: %v, %v", key, p, st, err)
			}
		case !errors.As(err, &nh) || nh.Partition != p:
			t.Fatalf("%s on partition %d: %v, want a NotHeldError", key, p, err)
		}
	}
	waitRead(t, v, held)
	seen := 0
	if err := v.Each(func(key string, _ *testpb.DeviceState) bool {
		if p := topology.PartitionFor(key, viewParts); p != 1 && p != 3 {
			t.Errorf("Each visited %s of partition %d", key, p)
		}
		seen++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if seen != held {
		t.Fatalf("Each visited %d, want %d", seen, held)
	}
}
