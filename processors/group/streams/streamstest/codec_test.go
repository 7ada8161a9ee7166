package streamstest_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// A windowed count written To a topic another stream of the app reads: the
// write and the read use one codec for the topic (Goka's tester refuses two
// with "different codecs for the same topic").
func TestWindowedCountReadBack(t *testing.T) {
	const n, e = "google.protobuf.Int64Value", "google.protobuf.Empty"
	topo := &topology.Topology{Name: "t", Topics: []topology.Topic{
		{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "ticks", Key: "id", Value: n, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "per-minute", Key: "id", Value: n, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "big", Key: "id", Value: n, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "wc-table", Key: "id", Value: "fencestream.kit.v1.WindowSet", Partitions: 2, Cleanup: topology.CleanupCompact},
		{Name: "app-table", Key: "id", Value: e, Partitions: 2, Cleanup: topology.CleanupCompact},
		topology.TimersTopic("wc", "id", 2),
	}}
	t0 := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	at := func(v *wrapperspb.Int64Value) time.Time { return time.UnixMilli(v.GetValue()) }
	b := streams.New(topo, "app", nil)
	b.Stream[wrapperspb.Int64Value]("ticks").GroupByKey().
		WindowedBy(streams.TimeWindows(windows.Tumbling(time.Minute, 0)), at).
		Count("wc").ToStream().To("per-minute")
	b.Stream[wrapperspb.Int64Value]("per-minute").
		Filter(func(_ string, v *wrapperspb.Int64Value) bool { return v.GetValue() >= 2 }).
		To("big")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(time.Hour))
	in := streamstest.InputTopic[wrapperspb.Int64Value](d, "ticks")
	for _, k := range []string{"a", "a", "b"} {
		in.Pipe(k, wrapperspb.Int64(t0.UnixMilli()))
	}
	in.Pipe("a", wrapperspb.Int64(t0.Add(2*time.Minute).UnixMilli())) // closes a's 08:00
	var got []string
	for _, r := range streamstest.OutputTopic[wrapperspb.Int64Value](d, "big").Read() {
		got = append(got, r.Key)
	}
	if len(got) != 1 || got[0] != streams.WindowKey("a", t0) {
		t.Fatalf("big holds %q, want a's 08:00 window (2 records) only", got)
	}
}
