package topology_test

import (
	"errors"
	"fmt"

	"github.com/fencestream/fencestream/topology"
)

func ExamplePartitionFor() {
	// The seeds' vectors: what Kafka's Java client does on real brokers.
	for _, key := range []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6"} {
		fmt.Printf("%s→%d\t", key, topology.PartitionFor(key, 6))
	}
	fmt.Println("(6 partitions)")
	for _, key := range []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"} {
		fmt.Printf("%s→%d\t", key, topology.PartitionFor(key, 3))
	}
	fmt.Println("(3 partitions)")
	// Output:
	// user-1→2	user-2→2	user-3→5	user-4→1	user-5→4	user-6→5	(6 partitions)
	// o-1→0	o-2→0	o-3→1	o-4→1	o-5→2	o-6→1	(3 partitions)
}

func ExampleValidateKey() {
	for _, key := range []string{"device-42", "", "dev\xff", string(make([]byte, 256))} {
		err := topology.ValidateKey(key, 0)
		var ke *topology.KeyError
		switch {
		case err == nil:
			fmt.Printf("%q ok\n", key)
		case errors.Is(err, topology.ErrEmptyKey):
			fmt.Println("empty key refused")
		case errors.As(err, &ke) && errors.Is(err, topology.ErrKeyTooLong):
			fmt.Printf("%d-byte key refused, limit %d\n", len(ke.Key), ke.Limit)
		default:
			fmt.Println(err)
		}
	}
	// Output:
	// "device-42" ok
	// empty key refused
	// key refused: key is not valid UTF-8 ("dev\xff")
	// 256-byte key refused, limit 255
}

func ExampleTopology_Validate() {
	// A processor that reads device-keyed pings and writes fence-keyed records,
	// without declaring the re-key as a boundary.
	t := &topology.Topology{
		Name: "wrong",
		Topics: []topology.Topic{
			{Name: "pings", Key: "device_id", Partitions: 24, Cleanup: topology.CleanupDelete},
			{Name: "by-fence", Key: "fence_id", Partitions: 24, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group:   "rekeyer",
			Streams: []string{"pings"},
			Emits:   []string{"by-fence"},
			Flows:   []topology.Flow{{From: "pings", To: "by-fence"}},
		}},
	}
	err := t.Validate()
	fmt.Println(errors.Is(err, topology.ErrUndeclaredRekey))
	fmt.Println(err)
	// Output:
	// true
	// topology: processor rekeyer: key changes without a declared boundary: flow pings (key device_id) -> by-fence (key fence_id) re-keys; declare a Boundary saying what order survives and what is lost
}
