package produce_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/produce"
)

func ExampleNew() {
	dir, _ := os.MkdirTemp("", "fencestream-example")
	defer os.RemoveAll(dir)
	broker, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	ctx := context.Background()

	// Topics come from the declared topology, created (or checked) by Ensure.
	g := geofence.Topology()
	kcl, _ := kgo.NewClient(kgo.SeedBrokers(broker.Addrs()...))
	defer kcl.Close()
	if err := g.Ensure(ctx, kadm.NewClient(kcl)); err != nil {
		fmt.Println(err)
		return
	}

	pings, err := produce.New[pb.Ping](cluster.Config{Brokers: broker.Addrs()}, g.MustTopic(geofence.TopicPings))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pings.Close()

	ping := &pb.Ping{DeviceId: "user-1", Lat: 50.45, Lon: 30.52}
	if err := pings.Emit(ctx, ping.GetDeviceId(), ping); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stamped:", ping.GetHlc() > 0)

	// Read it back: it is on the partition PartitionFor names, as a Java or
	// franz-go producer would have put it.
	consumer, _ := kgo.NewClient(kgo.SeedBrokers(broker.Addrs()...),
		kgo.ConsumeTopics(geofence.TopicPings), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs := consumer.PollRecords(pollCtx, 1).Records()
	if len(recs) == 0 {
		fmt.Println("record not found")
		return
	}
	rec := recs[0]
	fmt.Printf("%s on partition %d, PartitionFor says %d\n", rec.Key, rec.Partition, topology.PartitionFor("user-1", 24))

	err = pings.Emit(ctx, "", &pb.Ping{})
	fmt.Println(errors.Is(err, topology.ErrEmptyKey), err)
	// Output:
	// stamped: true
	// user-1 on partition 20, PartitionFor says 20
	// true key for topic pings refused: key is empty: a record without a key is spread round-robin and loses per-key order
}
