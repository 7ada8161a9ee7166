package streams_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// BenchmarkCount is a count per key on Goka's tester, written in the DSL
// and by hand on the kit, side by side: the DSL's own cost per record (its
// closures and the message wrapper) over the kit's.
func BenchmarkCount(b *testing.B) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	b.Run("dsl", func(b *testing.B) {
		sb := streams.New(opsTopology(), "ops", nil)
		sb.Stream[str]("in").GroupByKey().Count("agg")
		app, err := sb.Build()
		if err != nil {
			b.Fatal(err)
		}
		in := streamstest.InputTopic[str](streamstest.New(b, app, time.Unix(0, 0)), "in")
		v := wrapperspb.String("x")
		b.ResetTimer()
		for i := range b.N {
			in.Pipe(keys[i%len(keys)], v)
		}
	})
	b.Run("kit", func(b *testing.B) {
		topo := opsTopology()
		topo.Processors = append(topo.Processors, groupDecl())
		g := group.New[num](topo, "agg", nil)
		group.Stream(g, "in", func(c *group.Context[num, *num], _ *str) error {
			n := c.State()
			if n == nil {
				n = &num{}
			}
			n.Value++
			c.SetState(n)
			return nil
		})
		h := grouptest.New(b, time.Unix(0, 0))
		h.Start(g)
		v := wrapperspb.String("x")
		b.ResetTimer()
		for i := range b.N {
			h.Consume("in", keys[i%len(keys)], v)
		}
	})
}

func groupDecl() topology.Processor {
	return topology.Processor{Group: "agg", Streams: []string{"in"}, Emits: []string{topology.TopicDeadLetter}, Table: "agg-table"}
}
