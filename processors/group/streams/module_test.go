package streams_test

import (
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// A DSL app is a module like any other: host.Compose adds its topics, its
// groups' derived declarations and its boundaries to a base topology that
// declares its source; the app built on the composed topology runs.
func TestModuleComposes(t *testing.T) {
	full := wordTopology()
	var base, own []topology.Topic
	for _, tp := range full.Topics {
		if tp.Name == "lines" || tp.Name == topology.TopicDeadLetter {
			base = append(base, tp)
		} else {
			own = append(own, tp)
		}
	}
	define := func(b *streams.Builder) { defineWordCount(b) }
	topo, err := host.Compose(&topology.Topology{Name: "base", Topics: base}, streams.Module("wordcount", own, define))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topo.Boundary("wordcount", "lines", "words"); !ok {
		t.Fatalf("composed topology lacks the boundary lines -> words: %+v", topo.Boundaries)
	}
	for _, g := range []string{"wordcount", "word-counts"} {
		if _, ok := topo.Processor(g); !ok {
			t.Fatalf("composed topology lacks group %s", g)
		}
	}
	b := streams.New(topo, "wordcount", nil)
	counts := defineWordCount(b)
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, time.Unix(0, 0))
	streamstest.InputTopic[str](d, "lines").Pipe("l", &str{Value: "kafka kafka"})
	if n := streamstest.Get(d, counts, "kafka").GetValue(); n != 2 {
		t.Fatalf("kafka counted %d times, want 2", n)
	}
}
