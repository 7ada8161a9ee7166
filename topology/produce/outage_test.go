package produce_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestSendsRideOutABrokerRestart: records sent while the broker is down are
// delivered once it is back on its data directory, in order, none failed (on
// main every one failed within ~300 ms: sarama's 3 retries, and a batch
// whose connection broke failed at once when its leader could not be looked
// up; the simulator exited with it).
func TestSendsRideOutABrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b, err := embedded.Start(embedded.DataDir(dir), embedded.Port(port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	kcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	e := &env{top: testTopology(), cluster: cluster.Config{Brokers: b.Addrs()}, kcl: kcl, adm: kadm.NewClient(kcl)}
	if err := e.top.Ensure(ctx(t), e.adm); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, e, geofence.TopicPings)
	if err := p.Emit(ctx(t), "dev-0", &pb.Ping{DeviceId: "dev-0"}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	var waits []func() error
	for i := range 20 {
		w, err := p.EmitAsync("dev-1", &pb.Ping{DeviceId: fmt.Sprint("dev-1 #", i)})
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	// The outage is the fault under test: long enough for sarama's default
	// retries (3 x 100 ms) to have given up.
	time.Sleep(2 * time.Second)
	b, err = embedded.Start(embedded.DataDir(dir), embedded.Port(port))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range waits {
		if err := w(); err != nil {
			t.Fatalf("record %d sent during the outage: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := endOffsets(t, e, geofence.TopicPings); n != 21 {
		t.Fatalf("%d records on the topic, want 21", n)
	}
	recs := embeddedtest.ConsumeUntil(t, e.cluster, geofence.TopicPings, func(r []*kgo.Record) bool { return len(r) == 21 })
	next := 0
	for _, r := range recs {
		var ping pb.Ping
		if err := proto.Unmarshal(r.Value, &ping); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != "dev-1" {
			continue
		}
		if want := fmt.Sprint("dev-1 #", next); ping.GetDeviceId() != want {
			t.Fatalf("record %d of dev-1 is %q: order lost across the outage", next, ping.GetDeviceId())
		}
		next++
	}
}
