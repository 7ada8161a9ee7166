package streams_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

type (
	str = wrapperspb.StringValue
	num = wrapperspb.Int64Value
)

// opsTopology declares what the operator tests read and write.
func opsTopology() *topology.Topology {
	const s, n, e = "google.protobuf.StringValue", "google.protobuf.Int64Value", "google.protobuf.Empty"
	tp := func(name, key, value string, c topology.Cleanup) topology.Topic {
		return topology.Topic{Name: name, Key: key, Value: value, Partitions: 4, Cleanup: c}
	}
	return &topology.Topology{Name: "ops", Topics: []topology.Topic{
		tp(topology.TopicDeadLetter, topology.KeyOriginal, "", topology.CleanupDelete),
		tp("in", "id", s, topology.CleanupDelete),
		tp("in2", "id", s, topology.CleanupDelete),
		tp("out", "id", s, topology.CleanupDelete),
		tp("out2", "id", s, topology.CleanupDelete),
		tp("out3", "id", s, topology.CleanupDelete),
		tp("sizes", "id", n, topology.CleanupDelete),
		tp("by-len", "len", s, topology.CleanupDelete),
		tp("ops-table", "id", e, topology.CleanupCompact),
		tp("agg-table", "id", n, topology.CleanupCompact),
		tp("lens-table", "len", n, topology.CleanupCompact),
		tp("joined-table", "id", s, topology.CleanupCompact),
	}}
}

var byLen = topology.Boundary{Preserved: "the order of one id's values", Lost: "order between ids", Lag: "one hop"}

// build compiles what define declares and starts it on a driver.
func build(t *testing.T, define func(b *streams.Builder)) *streamstest.Driver {
	t.Helper()
	b := streams.New(opsTopology(), "ops", nil)
	define(b)
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return streamstest.New(t, app, time.Unix(1_800_000_000, 0))
}

func pipe(t *testing.T, d *streamstest.Driver, topic string, kvs ...string) {
	t.Helper()
	in := streamstest.InputTopic[str](d, topic)
	for i := 0; i < len(kvs); i += 2 {
		in.Pipe(kvs[i], wrapperspb.String(kvs[i+1]))
	}
}

func read(t *testing.T, d *streamstest.Driver, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range streamstest.OutputTopic[str](d, topic).Read() {
		out = append(out, r.Key+"="+r.Value.GetValue())
	}
	return out
}

func readNum(t *testing.T, d *streamstest.Driver, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range streamstest.OutputTopic[num](d, topic).Read() {
		out = append(out, fmt.Sprintf("%s=%d", r.Key, r.Value.GetValue()))
	}
	return out
}

func want(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func hasA(_ string, v *str) bool { return strings.HasPrefix(v.GetValue(), "a") }

func TestStatelessOperators(t *testing.T) {
	for _, tc := range []struct {
		name   string
		define func(b *streams.Builder)
		in     []string
		topic  string
		want   []string
	}{
		{"Filter", func(b *streams.Builder) { b.Stream[str]("in").Filter(hasA).To("out") },
			[]string{"k1", "apple", "k2", "pear", "k3", "avocado"}, "out", []string{"k1=apple", "k3=avocado"}},
		{"FilterNot", func(b *streams.Builder) { b.Stream[str]("in").FilterNot(hasA).To("out") },
			[]string{"k1", "apple", "k2", "pear"}, "out", []string{"k2=pear"}},
		{"Map", func(b *streams.Builder) {
			b.Stream[str]("in").Map(func(k string, v *str) (string, *str) {
				return k + "!", wrapperspb.String(strings.ToUpper(v.GetValue()))
			}).To("out")
		}, []string{"k1", "apple"}, "out", []string{"k1!=APPLE"}},
		{"MapValues", func(b *streams.Builder) {
			b.Stream[str]("in").MapValues(func(v *str) *str { return wrapperspb.String(v.GetValue() + v.GetValue()) }).To("out")
		}, []string{"k1", "ab"}, "out", []string{"k1=abab"}},
		{"FlatMap", func(b *streams.Builder) {
			b.Stream[str]("in").FlatMap(func(k string, v *str) []streams.KeyValue[str] {
				var out []streams.KeyValue[str]
				for i, w := range strings.Fields(v.GetValue()) {
					out = append(out, streams.Pair(fmt.Sprint(k, ".", i), wrapperspb.String(w)))
				}
				return out
			}).To("out")
		}, []string{"k1", "a b", "k2", "c"}, "out", []string{"k1.0=a", "k1.1=b", "k2.0=c"}},
		{"FlatMapValues", func(b *streams.Builder) {
			b.Stream[str]("in").FlatMapValues(func(v *str) []*str {
				var out []*str
				for _, w := range strings.Fields(v.GetValue()) {
					out = append(out, wrapperspb.String(w))
				}
				return out
			}).To("out")
		}, []string{"k1", "a b", "k2", ""}, "out", []string{"k1=a", "k1=b"}},
		{"Split", func(b *streams.Builder) {
			br := b.Stream[str]("in").Split(hasA, func(_ string, v *str) bool { return len(v.GetValue()) > 3 })
			br[0].To("out")
			br[1].To("out2")
			br[2].To("out3")
		}, []string{"k1", "apple", "k2", "pear", "k3", "fig"}, "out2", []string{"k2=pear"}},
		{"Merge", func(b *streams.Builder) {
			b.Stream[str]("in").Merge(b.Stream[str]("in2")).To("out")
		}, []string{"k1", "x"}, "out", []string{"k1=x", "k1=x2"}},
		{"SelectKey", func(b *streams.Builder) {
			b.Stream[str]("in").SelectKey(byLen, "by-len", func(_ string, v *str) string { return fmt.Sprint(len(v.GetValue())) })
		}, []string{"k1", "apple", "k2", "fig"}, "by-len", []string{"5=apple", "3=fig"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := build(t, tc.define)
			pipe(t, d, "in", tc.in...)
			if tc.name == "Merge" {
				pipe(t, d, "in2", "k1", "x2")
			}
			want(t, read(t, d, tc.topic), tc.want...)
			if tc.name == "Split" {
				want(t, read(t, d, "out"), "k1=apple")
				want(t, read(t, d, "out3"), "k3=fig")
			}
		})
	}
}

// A filter that names a reason dead-letters what it rejects, with the
// record's own key and the reason; one that does not drops it.
func TestFilterDeadLetters(t *testing.T) {
	d := build(t, func(b *streams.Builder) {
		b.Stream[str]("in").Filter(hasA, streams.DeadLetter("not-a")).To("out")
		b.Stream[str]("in").FilterNot(hasA).To("out2")
	})
	pipe(t, d, "in", "k1", "apple", "k2", "pear")
	want(t, read(t, d, "out"), "k1=apple")
	dl := d.DeadLetters()
	if len(dl) != 1 || dl[0].Key != "k2" || dl[0].Reason != "not-a" {
		t.Fatalf("dead letters %+v, want k2 with reason not-a", dl)
	}
}

func TestPeek(t *testing.T) {
	var seen []string
	d := build(t, func(b *streams.Builder) {
		b.Stream[str]("in").Peek(func(k string, v *str) { seen = append(seen, k+":"+v.GetValue()) }).To("out")
	})
	pipe(t, d, "in", "k1", "a", "k2", "b")
	want(t, read(t, d, "out"), "k1=a", "k2=b")
	want(t, seen, "k1:a", "k2:b")
}

func TestAggregations(t *testing.T) {
	var lens streams.Table[num]
	d := build(t, func(b *streams.Builder) {
		in := b.Stream[str]("in")
		in.GroupByKey().Reduce("joined", func(agg, v *str) *str { return wrapperspb.String(agg.GetValue() + "+" + v.GetValue()) }).
			ToStream().To("out")
		sum := in.GroupByKey().Aggregate("agg", func() *num { return &num{} }, func(_ string, v *str, agg *num) *num {
			agg.Value += int64(len(v.GetValue()))
			return agg
		})
		sum.Filter(func(_ string, v *num) bool { return v.GetValue() > 3 }).
			MapValues(func(v *num) *num { return wrapperspb.Int64(v.GetValue() * 10) }).
			ToStream().To("sizes")
		lens = in.GroupBy(byLen, "by-len", func(_ string, v *str) string { return fmt.Sprint(len(v.GetValue())) }).Count("lens")
	})
	pipe(t, d, "in", "k1", "ab", "k2", "xyz", "k1", "cd", "k2", "pq")
	want(t, read(t, d, "out"), "k1=ab", "k2=xyz", "k1=ab+cd", "k2=xyz+pq")
	want(t, readNum(t, d, "sizes"), "k1=40", "k2=50")
	for key, n := range map[string]int64{"2": 3, "3": 1} {
		if got := streamstest.Get(d, lens, key).GetValue(); got != n {
			t.Errorf("count of length %s = %d, want %d", key, got, n)
		}
	}
}

// What cannot run is refused when the app is built, naming what is wrong.
func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		define func(b *streams.Builder)
		want   []string
	}{
		{"re-key without a boundary", func(b *streams.Builder) {
			b.Stream[str]("in").SelectKey(topology.Boundary{}, "by-len", func(k string, _ *str) string { return k })
		}, []string{"in (key id)", "by-len (key len)", "no boundary"}},
		{"To a topic of another key", func(b *streams.Builder) { b.Stream[str]("in").To("by-len") },
			[]string{"by-len", "SelectKey"}},
		{"To a topic of another type", func(b *streams.Builder) { b.Stream[str]("in").To("sizes") },
			[]string{"sizes", "google.protobuf.Int64Value", "not google.protobuf.StringValue"}},
		{"an undeclared topic", func(b *streams.Builder) { b.Stream[str]("nowhere").To("out") },
			[]string{"nowhere", "no such topic"}},
		{"a value that is not a message", func(b *streams.Builder) { b.Stream[int]("in") },
			[]string{"int is not a protobuf message"}},
		{"GroupByKey after a key change", func(b *streams.Builder) {
			b.Stream[str]("in").Map(func(k string, v *str) (string, *str) { return v.GetValue(), v }).GroupByKey().Count("agg")
		}, []string{"aggregation agg", "GroupBy(boundary, topic, fn)"}},
		{"an undeclared table", func(b *streams.Builder) { b.Stream[str]("in").GroupByKey().Count("nope") },
			[]string{"nope-table", "no such topic"}},
		{"a boundary on a flow that keeps its key", func(b *streams.Builder) {
			b.Stream[str]("in").SelectKey(byLen, "out", func(k string, _ *str) string { return k })
		}, []string{"in to out", "both topics are keyed by id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.New(opsTopology(), "ops", nil)
			tc.define(b)
			_, err := b.Build()
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The routing group needs its table declared: the error names it.
func TestRoutingTableMustBeDeclared(t *testing.T) {
	topo := opsTopology()
	topo.Topics = slices.DeleteFunc(topo.Topics, func(tp topology.Topic) bool { return tp.Name == "ops-table" })
	b := streams.New(topo, "ops", nil)
	b.Stream[str]("in").To("out")
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "ops-table") {
		t.Fatalf("err %v, want one naming ops-table", err)
	}
}
