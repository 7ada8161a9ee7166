package streams_test

import (
	"strings"
	"testing"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/topology"
)

// A re-key topic named like an app group's loop topic (Goka's group+"-loop")
// would build and then fail at start ("should not directly use loop
// stream"): Build refuses it, naming the topic and why.
func TestBuildRefusesLoopTopic(t *testing.T) {
	topo := opsTopology()
	topo.Topics = append(topo.Topics, topology.Topic{Name: "lens-loop", Key: "len", Value: "google.protobuf.StringValue", Partitions: 4, Cleanup: topology.CleanupDelete})
	b := streams.New(topo, "ops", nil)
	b.Stream[str]("in").GroupBy(byLen, "lens-loop", func(_ string, v *str) string { return v.GetValue() }).Count("lens")
	_, err := b.Build()
	if err == nil {
		t.Fatal("built an app whose aggregation lens reads lens-loop")
	}
	for _, w := range []string{"lens-loop", "loop topic of group lens"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
