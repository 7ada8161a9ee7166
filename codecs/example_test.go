package codecs_test

import (
	"fmt"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
)

func ExampleFor() {
	codec := codecs.For[pb.Ping]() // a goka.Codec for *pb.Ping

	data, err := codec.Encode(&pb.Ping{DeviceId: "dev-1", Lat: 50.45, Lon: 30.52, Hlc: 7})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := codec.Decode(data)
	if ping, _, ok := codecs.As[pb.Ping](v); ok {
		fmt.Println(ping.GetDeviceId(), ping.GetLat(), ping.GetLon(), ping.GetHlc())
	}

	// Bytes that are not a Ping do not fail the processor: they decode to a
	// Poison for the dead-letter topic.
	v, err = codec.Decode([]byte("not a ping"))
	if _, poison, ok := codecs.As[pb.Ping](v); !ok && poison != nil {
		fmt.Println(err, poison.Schema, len(poison.Data))
	}

	_, err = codec.Encode(&pb.Fence{})
	fmt.Println(err)
	// Output:
	// dev-1 50.45 30.52 7
	// <nil> fencestream.v1.Ping 10
	// codecs: cannot encode *geofencepb.Fence as fencestream.v1.Ping
}
