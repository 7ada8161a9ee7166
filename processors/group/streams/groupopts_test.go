package streams_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

func ttlTopology() *topology.Topology {
	topo := windowTopology()
	topo.Topics = append(topo.Topics,
		topology.Topic{Name: "cnt-table", Key: "id", Value: "google.protobuf.Int64Value", Partitions: 4, Cleanup: topology.CleanupCompact},
		topology.TimersTopic("cnt", "id", 4),
	)
	return topo
}

// An aggregation's options reach its group's group.New: a StateTTL given to
// Count expires a key that stream time has left behind.
func TestAggregationStateTTL(t *testing.T) {
	b := streams.New(ttlTopology(), "ops", nil)
	counts := b.Stream[num]("ticks", streams.EventTime(tickTime)).GroupByKey().Count("cnt", group.StateTTL(time.Minute))
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	in := streamstest.InputTopic[num](d, "ticks")
	tick(in, "a", 0)
	if got := streamstest.Get(d, counts, "a"); got.GetValue() != 1 {
		t.Fatalf("a counts %v before its TTL, want 1", got)
	}
	tick(in, "b", 5*time.Minute) // stream time passes a's latest input plus the TTL
	d.FireTimers()
	if got := streamstest.Get(d, counts, "a"); got != nil {
		t.Fatalf("a counts %v after its TTL, want it expired", got)
	}
	if got := streamstest.Get(d, counts, "b"); got.GetValue() != 1 {
		t.Fatalf("b counts %v, want 1", got)
	}
}

// An option of Processor or Run given to an aggregation is refused by Build
// with the kit's wrong-place error, for each kind of aggregation.
func TestAggregationRefusesRunOption(t *testing.T) {
	for name, define := range map[string]func(b *streams.Builder){
		"Count": func(b *streams.Builder) {
			b.Stream[num]("ticks").GroupByKey().Count("cnt", group.HotStandby(true))
		},
		"Reduce": func(b *streams.Builder) {
			b.Stream[num]("ticks").GroupByKey().Reduce("cnt", func(a, v *num) *num { return v }, group.HotStandby(true))
		},
		"Aggregate": func(b *streams.Builder) {
			b.Stream[num]("ticks").GroupByKey().Aggregate[num]("cnt", func() *num { return &num{} }, func(_ string, v, a *num) *num { return a }, group.HotStandby(true))
		},
		"windowed Count": func(b *streams.Builder) {
			b.Stream[num]("ticks").GroupByKey().WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 0)), tickTime).Count("wc", group.HotStandby(true))
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := streams.New(ttlTopology(), "ops", nil)
			define(b)
			_, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), "HotStandby: an option of Processor or Run, given to New") {
				t.Fatalf("err %v, want the kit's wrong-place error naming HotStandby", err)
			}
		})
	}
}
