package streamstest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// fatalT records the driver's first fatal failure instead of ending the
// test, so a test can say the driver failed at once.
type fatalT struct {
	testing.TB
	fatal string
}

func (f *fatalT) Helper()                        {}
func (f *fatalT) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...); panic(f) }

func topo() *topology.Topology {
	const s, e = "google.protobuf.StringValue", "google.protobuf.Empty"
	return &topology.Topology{Name: "t", Topics: []topology.Topic{
		{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "in", Key: "id", Value: s, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "other", Key: "id", Value: s, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "out", Key: "id", Value: s, Partitions: 2, Cleanup: topology.CleanupDelete},
		{Name: "app-table", Key: "id", Value: e, Partitions: 2, Cleanup: topology.CleanupCompact},
	}}
}

// Piping into a topic no group reads would leave Goka's tester waiting for
// a reader: the driver refuses it at once, naming the topic.
func TestInputNobodyReadsFailsAtOnce(t *testing.T) {
	b := streams.New(topo(), "app", nil)
	b.Stream[wrapperspb.StringValue]("in").To("out")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, time.Unix(0, 0))
	f := &fatalT{TB: t}
	start := time.Now()
	func() {
		defer func() { recover() }()
		streamstest.InputTopic[wrapperspb.StringValue](streamstest.Rebind(d, f), "other")
	}()
	if !strings.Contains(f.fatal, "no group of the app reads other") || time.Since(start) > time.Second {
		t.Fatalf("fatal %q after %v, want one naming other at once", f.fatal, time.Since(start))
	}
	streamstest.InputTopic[wrapperspb.StringValue](d, "in").Pipe("k", wrapperspb.String("v"))
	if got := streamstest.OutputTopic[wrapperspb.StringValue](d, "out").Read(); len(got) != 1 || got[0].Value.GetValue() != "v" {
		t.Fatalf("out %v", got)
	}
}

// Get reads a stored table only: a derived table, or a windowed table as
// if it held its stream's type, is refused at once; Stored reads what a
// table stores, of that type only.
func TestGetRefusesWhatIsNotStored(t *testing.T) {
	tp := topo()
	tp.Topics = append(tp.Topics, topology.Topic{Name: "n-table", Key: "id", Value: "google.protobuf.Int64Value", Partitions: 2, Cleanup: topology.CleanupCompact})
	b := streams.New(tp, "app", nil)
	counts := b.Stream[wrapperspb.StringValue]("in").GroupByKey().Count("n")
	derived := counts.Filter(func(string, *wrapperspb.Int64Value) bool { return true })
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, time.Unix(0, 0))
	f := &fatalT{TB: t}
	func() {
		defer func() { recover() }()
		streamstest.Get(streamstest.Rebind(d, f), derived, "k")
	}()
	if !strings.Contains(f.fatal, "stored nowhere") {
		t.Fatalf("fatal %q, want the derived table refused", f.fatal)
	}
	if got := streamstest.Get(d, counts, "k"); got != nil {
		t.Fatalf("count of an unseen key %v, want nil", got)
	}
	f.fatal = ""
	func() {
		defer func() { recover() }()
		streamstest.Stored[wrapperspb.StringValue](streamstest.Rebind(d, f), counts, "k")
	}()
	if !strings.Contains(f.fatal, "stores google.protobuf.Int64Value, not google.protobuf.StringValue") {
		t.Fatalf("fatal %q, want Stored of another type refused", f.fatal)
	}
	streamstest.InputTopic[wrapperspb.StringValue](d, "in").Pipe("k", wrapperspb.String("v"))
	if got := streamstest.Stored[wrapperspb.Int64Value](d, counts, "k"); got.GetValue() != 1 {
		t.Fatalf("Stored count of k %v, want 1", got)
	}
}
