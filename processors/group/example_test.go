package group_test

import (
	"fmt"
	"log/slog"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology"
)

// A group is built from its topology declaration; Graph refuses it until its
// handlers and outputs are exactly what the declaration names. Every group
// dead-letters bad input, so every declaration lists the dead-letter topic.
func ExampleGroup_Graph() {
	topo := &topology.Topology{
		Name: "counter",
		Topics: []topology.Topic{
			{Name: "clicks", Key: "user_id", Partitions: 6, Cleanup: topology.CleanupDelete},
			{Name: "clicks-counter-table", Key: "user_id", Partitions: 6, Cleanup: topology.CleanupCompact},
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 6, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group:   "clicks-counter",
			Streams: []string{"clicks"},
			Emits:   []string{topology.TopicDeadLetter},
			Table:   "clicks-counter-table",
			Flows: []topology.Flow{
				{From: "clicks", To: "clicks-counter-table"},
				{From: "clicks", To: topology.TopicDeadLetter},
			},
		}},
	}
	log := slog.New(slog.DiscardHandler)
	// Any generated protobuf types work; the geofencing ones stand in here.
	type (
		State = testpb.DeviceState
		Ctx   = group.Context[testpb.DeviceState, *testpb.DeviceState]
	)

	g := group.New[State](topo, "clicks-counter", log)
	fmt.Println("group:", g.Name())
	if _, err := g.Graph(); err != nil {
		fmt.Println("refused:", err)
	}

	group.Stream(g, "clicks", func(c *Ctx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &State{DeviceId: c.Key()}
		}
		st.Pings++
		c.SetState(st)
		return nil
	})
	gg, err := g.Graph()
	fmt.Println("built:", gg.Group(), "table:", gg.GroupTable().Topic(), err)

	_, err = group.New[State](topo, "clicks-mailer", log).Graph()
	fmt.Println("refused:", err)
	// Output:
	// group: clicks-counter
	// refused: group clicks-counter does not match its topology declaration: declared stream input clicks has no handler
	// built: clicks-counter table: clicks-counter-table <nil>
	// refused: group clicks-mailer: not declared in topology counter
}
