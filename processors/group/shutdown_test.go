package group_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/cluster"
)

// stuckClose is a table whose Close does not return until released (Pebble
// after a panic inside a write: a mutex left held).
type stuckClose struct {
	storage.Storage
	release <-chan struct{}
}

func (s stuckClose) Close() error { <-s.release; return s.Storage.Close() }

// TestStopIsBounded: a processor whose tables never close still returns from
// Run, soon after its context ends, with ErrStopTimeout (a binary then
// exits: SIGTERM is honoured); without the bound Run waited for good.
func TestStopIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := startBroker(t, t.TempDir())
	cl := cluster.Config{Brokers: b.Addrs()}
	kc, err := kgo.NewClient(kgo.SeedBrokers(cl.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	stuck := func(string, int32) (storage.Storage, error) {
		return stuckClose{Storage: storage.NewMemory(), release: release}, nil
	}
	h := &counting{}
	proc, err := validGroupOut(topo, h.handle).Processor(ctx, cl, group.StateDir(t.TempDir()),
		group.GokaOptions(goka.WithStorageBuilder(stuck)), group.Registerer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	group.SetStopWait(proc, 500*time.Millisecond)
	r := runInBackground(proc)
	r.until(t, "ready", time.Minute, func() bool { return proc.Ready() == nil })
	stopped := time.Now()
	r.stop()
	select {
	case err := <-r.done:
		if !errors.Is(err, group.ErrStopTimeout) {
			t.Fatalf("Run = %v, want ErrStopTimeout", err)
		}
		t.Logf("Run returned %v after the stop: %v", time.Since(stopped).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run still waiting 30 s after the stop for tables that never close")
	}
}
