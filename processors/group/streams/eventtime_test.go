package streams_test

import (
	"testing"
	"time"

	"github.com/lovoo/goka"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
)

// A source's EventTime moves the stream time of every group reading it:
// the aggregation's envelope records the record's event time as its
// partition's stream time (the kit's Envelope.stream_ms).
func TestSourceEventTime(t *testing.T) {
	b := streams.New(windowTopology(), "ops", nil)
	b.Stream[num]("ticks", streams.EventTime(tickTime)).GroupByKey().
		Aggregate("agg", func() *num { return &num{} }, func(_ string, v *num, n *num) *num {
			n.Value = v.GetValue()
			return n
		})
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(time.Hour))
	at := t0.Add(time.Minute)
	streamstest.InputTopic[num](d, "ticks").Pipe("k", wrapperspb.Int64(at.UnixMilli()))
	d.Harness().Catchup()
	env, ok := d.Harness().TT.TableValue(goka.Table("agg-table"), "k").(*kitpb.Envelope)
	if !ok || env.GetStreamMs() != at.UnixMilli() {
		t.Fatalf("envelope %v, want stream time %d", env, at.UnixMilli())
	}
}
