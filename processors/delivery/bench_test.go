package delivery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// BenchmarkDeliveries is the delivery processor (both groups, the kit's
// default storage) draining b.N triggers of 200 devices, already in
// fence-triggers, to one local receiver that answers 204 at once: one
// HTTP request per trigger, signed. It reports deliveries per second from
// ready to the last request received. A partition attempts one trigger at
// a time, so the figure grows with the partition count until the CPU is
// the limit.
//
//	go test -run '^$' -bench Deliveries -benchtime 20000x ./processors/delivery/
func BenchmarkDeliveries(b *testing.B) {
	for _, n := range []int32{6, 24} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { benchDeliveries(b, n) })
	}
}

func benchDeliveries(b *testing.B, partitions int32) {
	const devices = 200
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // a benchmark receiver
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cl := cluster.Config{Brokers: embeddedtest.Start(b).Addrs()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	topo, err := host.Compose(modules.Base(partitions), delivery.Module())
	if err != nil {
		b.Fatal(err)
	}
	if err := topo.Ensure(ctx, kadm.NewClient(embeddedtest.Client(b, cl))); err != nil {
		b.Fatal(err)
	}
	prod := embeddedtest.Client(b, cl, kgo.ProducerLinger(5*time.Millisecond))
	codec := codecs.For[geofencepb.Trigger]()
	recs := make([]*kgo.Record, 0, b.N)
	for i := range b.N {
		tr := trigger(fmt.Sprintf("dev-%03d", i%devices), "f-1", i/devices+1)
		v, err := codec.Marshal(tr)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: geofence.TopicTriggers, Key: []byte(tr.DeviceId), Value: v})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	subs := delivery.NewSubscriptions()
	subs.Put(sub("bench", srv.URL))
	ready := make(chan struct{})
	done := make(chan error, 1)
	env := host.Env{Cluster: cl, Topology: topo, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry(),
		Group: []group.Opt{group.StateDir(b.TempDir())},
		Started: func(*group.Processor) {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}}
	go func() { done <- delivery.Run(ctx, env, delivery.SharedSubscriptions(subs)) }()
	select {
	case <-ready:
	case err := <-done:
		b.Fatalf("delivery stopped: %v", err)
	}
	b.ResetTimer()
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for got.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered in 5 min", got.Load(), b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
