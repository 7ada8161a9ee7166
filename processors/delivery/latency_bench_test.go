package delivery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
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

// BenchmarkTriggerToDelivery is the delivery processor (both groups, 6
// partitions, the kit's default storage) on the embedded broker, fed b.N
// triggers of 200 devices at a steady rate, each posted to one local
// receiver that answers 204 at once. It reports the time from a trigger's
// produce call to its first arrival at the receiver, p50 and p99 in ms.
// At 200/s, 3000x is 15 s of triggers; at 1000/s, 3 s.
//
// The slow= case adds a second subscription whose receiver answers 204
// only after that delay, and still measures the fast receiver: a handler
// call waits for an attempt at most the attempt wait (the rest goes on in
// the background), so the slow answer should cost the fast receiver
// little (before, every trigger of the slow one's partitions paid it).
//
//	go test -run '^$' -bench TriggerToDelivery -benchtime 3000x ./processors/delivery/
func BenchmarkTriggerToDelivery(b *testing.B) {
	for _, c := range []struct {
		rate int
		slow time.Duration
	}{{200, 0}, {1000, 0}, {200, 20 * time.Millisecond}} {
		name := fmt.Sprintf("rate=%d", c.rate)
		if c.slow > 0 {
			name += fmt.Sprintf("/slow=%s", c.slow)
		}
		b.Run(name, func(b *testing.B) { benchLatency(b, c.rate, c.slow) })
	}
}

func benchLatency(b *testing.B, rate int, slow time.Duration) {
	const partitions, devices = 6, 200
	var (
		mu      sync.Mutex
		arrived = make(map[string]time.Time, b.N)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		io.Copy(io.Discard, r.Body) //nolint:errcheck // a benchmark receiver
		mu.Lock()
		if id := r.Header.Get(delivery.HeaderIdempotencyKey); arrived[id].IsZero() {
			arrived[id] = now
		}
		mu.Unlock()
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
	subs := delivery.NewSubscriptions()
	subs.Put(sub("bench", srv.URL))
	if slow > 0 {
		slowSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) //nolint:errcheck // a benchmark receiver
			time.Sleep(slow)            // the slow answer being measured
			w.WriteHeader(http.StatusNoContent)
		}))
		defer slowSrv.Close()
		subs.Put(sub("slow", slowSrv.URL))
	}
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

	prod := embeddedtest.Client(b, cl)
	codec := codecs.For[geofencepb.Trigger]()
	recs := make([]*kgo.Record, b.N)
	for i := range b.N {
		tr := trigger(fmt.Sprintf("dev-%03d", i%devices), "f-1", i/devices+1)
		v, err := codec.Marshal(tr)
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: geofence.TopicTriggers, Key: []byte(tr.DeviceId), Value: v}
	}
	sent := make([]time.Time, b.N)
	produceErr := make(chan error, 1)
	b.ResetTimer()
	// Steady rate: trigger i is due at start + i/rate; each wake-up
	// produces every trigger due by then, so a late wake-up catches up.
	start := time.Now()
	for i := 0; i < b.N; {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		for now := time.Now(); i < b.N && !start.Add(time.Duration(i)*time.Second/time.Duration(rate)).After(now); i++ {
			sent[i] = time.Now()
			prod.Produce(ctx, recs[i], func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case produceErr <- err:
					default:
					}
				}
			})
		}
	}
	produceSpan := time.Since(start)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		select {
		case err := <-produceErr:
			b.Fatalf("produce: %v", err)
		default:
		}
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered in 5 min", n, b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	lat := make([]time.Duration, 0, b.N)
	mu.Lock()
	for i, r := range recs {
		id := trigger(string(r.Key), "f-1", i/devices+1).TriggerId
		at, ok := arrived[id]
		if !ok {
			mu.Unlock()
			b.Fatalf("trigger %s never arrived", id)
		}
		lat = append(lat, at.Sub(sent[i]))
	}
	mu.Unlock()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/produceSpan.Seconds(), "produced/s")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
