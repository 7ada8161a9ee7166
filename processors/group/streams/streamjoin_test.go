package streams_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// The windowed join tests transcribe Kafka Streams' KStreamKStreamJoinTest,
// KStreamKStreamLeftJoinTest and KStreamKStreamOuterJoinTest
// (apache/kafka, streams/src/test/java/org/apache/kafka/streams/kstream/
// internals/): the same inputs, and after each group of inputs the records
// its checkAndClearProcessResult expects. Its topic1 is "left" (values
// Pings: the value in device_id, the record's timestamp in device_time_ms,
// the source's EventTime), its topic2 is "right" (Triggers: fence_id and
// event_time_ms), and its MockValueJoiner.TOSTRING_JOINER is ksJoiner. The
// results of one group are compared key by key: across keys the kit hands a
// key's closed records over by the key's own record or timer (the windows
// package doc, Stream-stream joins).

type (
	ping = testpb.Ping
	trig = testpb.Trigger
)

// joinTopology declares one partition a topic, as Kafka Streams'
// TopologyTestDriver has: stream time is one for every key.
func joinTopology() *topology.Topology {
	const (
		p, tr, s, n = "fencestream.kit.test.v1.Ping", "fencestream.kit.test.v1.Trigger", "google.protobuf.StringValue", "google.protobuf.Int64Value"
		buffer      = "fencestream.kit.v1.JoinBuffer"
	)
	tp := func(name, key, value string, c topology.Cleanup) topology.Topic {
		return topology.Topic{Name: name, Key: key, Value: value, Partitions: 1, Cleanup: c}
	}
	return &topology.Topology{Name: "ssj", Topics: []topology.Topic{
		tp(topology.TopicDeadLetter, topology.KeyOriginal, "", topology.CleanupDelete),
		tp("left", "id", p, topology.CleanupDelete),
		tp("right", "id", tr, topology.CleanupDelete),
		tp("right-by-fence", "fence", tr, topology.CleanupDelete),
		tp("joined", "id", s, topology.CleanupDelete),
		tp("j-table", "id", buffer, topology.CleanupCompact),
		topology.TimersTopic("j", "id", 1),
		tp("ssj-table", "id", "google.protobuf.Empty", topology.CleanupCompact),
		// Example_windowedJoin's.
		tp("impressions", "ad", n, topology.CleanupDelete),
		tp("clicks", "ad", n, topology.CleanupDelete),
		tp("ad-clicks", "ad", s, topology.CleanupDelete),
		tp("shown-clicked-table", "ad", buffer, topology.CleanupCompact),
		topology.TimersTopic("shown-clicked", "ad", 1),
	}}
}

func pingTime(p *ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }
func trigTime(r *trig) time.Time { return time.UnixMilli(r.GetEventTimeMs()) }

// ksJoiner is Kafka Streams' MockValueJoiner.TOSTRING_JOINER: value1+value2,
// "null" for a missing side.
func ksJoiner(l *ping, r *trig) *str {
	ls, rs := "null", "null"
	if l != nil {
		ls = l.GetDeviceId()
	}
	if r != nil {
		rs = r.GetFenceId()
	}
	return wrapperspb.String(ls + "+" + rs)
}

// ksJoin is a Kafka Streams join test's app: left joined with right by kind
// ("join", "leftJoin", "outerJoin") into group j, written to joined.
type ksJoin struct {
	t     *testing.T
	d     *streamstest.Driver
	left  streamstest.Input[ping]
	right streamstest.Input[trig]
}

func newKSJoin(t *testing.T, kind string, w streams.JoinWindow) *ksJoin {
	t.Helper()
	b := streams.New(joinTopology(), "ssj", nil)
	l := b.Stream[ping]("left", streams.EventTime(pingTime))
	r := b.Stream[trig]("right", streams.EventTime(trigTime))
	switch kind {
	case "join":
		l.JoinWindowed(r, "j", w, ksJoiner).To("joined")
	case "leftJoin":
		l.LeftJoinWindowed(r, "j", w, ksJoiner).To("joined")
	case "outerJoin":
		l.OuterJoinWindowed(r, "j", w, ksJoiner).To("joined")
	}
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, time.Unix(1_800_000_000, 0))
	return &ksJoin{t: t, d: d, left: streamstest.InputTopic[ping](d, "left"), right: streamstest.InputTopic[trig](d, "right")}
}

// pipe1 is inputTopic1.pipeInput(key, value, ts); each record's due timers
// are fired before the next, as Kafka Streams' processor looks at closed
// windows on every record.
func (k *ksJoin) pipe1(key, value string, ts int64) {
	k.t.Helper()
	k.left.Pipe(key, &ping{DeviceId: value, DeviceTimeMs: ts})
	k.d.FireTimers()
}

// pipe2 is inputTopic2.pipeInput(key, value, ts).
func (k *ksJoin) pipe2(key, value string, ts int64) {
	k.t.Helper()
	k.right.Pipe(key, &trig{FenceId: value, EventTimeMs: ts})
	k.d.FireTimers()
}

// each pipes value prefix+key at ts for each of Kafka Streams' expectedKeys
// (0..3), on topic 1 or 2.
func (k *ksJoin) each(topic int, prefix string, ts int64) {
	k.t.Helper()
	for key := range 4 {
		if topic == 1 {
			k.pipe1(fmt.Sprint(key), fmt.Sprint(prefix, key), ts)
		} else {
			k.pipe2(fmt.Sprint(key), fmt.Sprint(prefix, key), ts)
		}
	}
}

// check is checkAndClearProcessResult: want is "key:value" as Kafka Streams'
// KeyValueTimestamps (the timestamp left out), compared key by key.
func (k *ksJoin) check(step string, want ...string) {
	k.t.Helper()
	var got []string
	for _, r := range streamstest.OutputTopic[str](k.d, "joined").Read() {
		got = append(got, r.Key+":"+r.Value.GetValue())
	}
	if g, w := byKey(got), byKey(want); g != w {
		k.t.Fatalf("%s:\n got  %s\n want %s", step, g, w)
	}
}

// byKey is the records per key, in their order, keys sorted.
func byKey(recs []string) string {
	m := map[string][]string{}
	for _, r := range recs {
		k, v, _ := strings.Cut(r, ":")
		m[k] = append(m[k], v)
	}
	return fmt.Sprint(m)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// KStreamKStreamJoinTest.testAsymmetricWindowingAfter:
// JoinWindows.ofTimeDifferenceWithNoGrace(0).after(100), inner.
func TestJoinWindowedAsymmetricAfter(t *testing.T) {
	k := newKSJoin(t, "join", streams.JoinWindows(0, 0).After(ms(100)))
	for key := range 4 {
		k.pipe1(fmt.Sprint(key), fmt.Sprint("A", key), 1000+int64(key))
	}
	k.check("A0..A3 at 1000..1003")
	k.each(2, "a", 999)
	k.check("a at 999: before A0's window")
	k.each(2, "b", 1000)
	k.check("b at 1000", "0:A0+b0")
	k.each(2, "c", 1001)
	k.check("c at 1001", "0:A0+c0", "1:A1+c1")
	k.each(2, "d", 1002)
	k.check("d at 1002", "0:A0+d0", "1:A1+d1", "2:A2+d2")
	k.each(2, "e", 1003)
	k.check("e at 1003", "0:A0+e0", "1:A1+e1", "2:A2+e2", "3:A3+e3")
	k.each(2, "f", 1100)
	k.check("f at 1100", "0:A0+f0", "1:A1+f1", "2:A2+f2", "3:A3+f3")
	k.each(2, "g", 1101)
	k.check("g at 1101", "1:A1+g1", "2:A2+g2", "3:A3+g3")
	k.each(2, "h", 1102)
	k.check("h at 1102", "2:A2+h2", "3:A3+h3")
	k.each(2, "i", 1103)
	k.check("i at 1103", "3:A3+i3")
	k.each(2, "j", 1104)
	k.check("j at 1104: after every window")
}

// KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted:
// JoinWindows.ofTimeDifferenceWithNoGrace(100).after(ZERO), left. A left
// record's window closes at once (after 0), so the next record hands it over
// alone; it still joins the right records within its window (before 100)
// while it is retained.
func TestLeftJoinWindowedZeroAfter(t *testing.T) {
	k := newKSJoin(t, "leftJoin", streams.JoinWindows(ms(100), 0).After(0))
	for key := range 4 {
		k.pipe1(fmt.Sprint(key), fmt.Sprint("A", key), 1000+int64(key))
	}
	k.check("A0..A3 at 1000..1003", "0:A0+null", "1:A1+null", "2:A2+null")
	k.each(2, "a", 999)
	k.check("a at 999", "0:A0+a0", "1:A1+a1", "2:A2+a2", "3:A3+a3")
	k.each(2, "b", 1000)
	k.check("b at 1000", "0:A0+b0", "1:A1+b1", "2:A2+b2", "3:A3+b3")
	k.each(2, "c", 1001)
	k.check("c at 1001: too late for A0", "1:A1+c1", "2:A2+c2", "3:A3+c3")
	k.each(2, "d", 1002)
	k.check("d at 1002", "2:A2+d2", "3:A3+d3")
	k.each(2, "e", 1003)
	k.check("e at 1003", "3:A3+e3")
	k.each(2, "f", 1100)
	k.check("f at 1100: nothing (right records are never handed over alone)")
}

// KStreamKStreamOuterJoinTest.testGracePeriod:
// JoinWindows.ofTimeDifferenceAndGrace(100, 10), outer. Unmatched records
// wait for the grace: nothing at stream time 101, both at 112.
func TestOuterJoinWindowedGrace(t *testing.T) {
	k := newKSJoin(t, "outerJoin", streams.JoinWindows(ms(100), ms(10)))
	k.pipe1("0", "A0", 0)
	k.pipe2("1", "11", 0)
	k.check("A0 and 11 at 0: no pair, windows open")
	k.pipe1("1", "A1", 101)
	k.pipe2("0", "10", 101)
	k.check("A1 and 10 at 101: windows ended, not closed (grace)")
	k.pipe2("0", "100", 112)
	k.check("100 at 112: windows closed", "1:null+11", "0:A0+null")
}

// KStreamKStreamOuterJoinTest.testOuterJoinDuplicates:
// JoinWindows.ofTimeDifferenceAndGrace(100, 10), outer: unmatched duplicates
// of both sides once their windows close, joined duplicates each once.
func TestOuterJoinWindowedDuplicates(t *testing.T) {
	k := newKSJoin(t, "outerJoin", streams.JoinWindows(ms(100), ms(10)))
	k.pipe1("0", "A0", 0)
	k.pipe1("0", "A0-0", 0)
	k.pipe2("1", "11", 0)
	k.pipe2("1", "12", 0)
	k.pipe2("1", "10", 111)
	k.pipe2("3", "100", 211)
	k.check("non-joined duplicates", "1:null+11", "1:null+12", "0:A0+null", "0:A0-0+null")
	k.pipe1("2", "A2", 200)
	k.pipe1("2", "A2-0", 200)
	k.pipe2("2", "13", 201)
	k.pipe2("2", "14", 201)
	k.check("joined duplicates", "2:A2+13", "2:A2-0+13", "2:A2+14", "2:A2-0+14")
	k.pipe2("3", "100", 1500)
	k.check("expired", "1:null+10", "3:null+100")
}

// The stateless operators before a windowed join run in its group, on each
// side's source: a side's type may differ from its source's.
func TestJoinWindowedAfterStatelessOperators(t *testing.T) {
	b := streams.New(joinTopology(), "ssj", nil)
	l := b.Stream[ping]("left", streams.EventTime(pingTime)).
		Filter(func(_ string, p *ping) bool { return p.GetDeviceId() != "skip" }).
		MapValues(func(p *ping) *str { return wrapperspb.String(strings.ToUpper(p.GetDeviceId())) })
	r := b.Stream[trig]("right", streams.EventTime(trigTime))
	l.JoinWindowed(r, "j", streams.JoinWindows(ms(10), 0), func(s *str, r *trig) *str {
		return wrapperspb.String(s.GetValue() + "+" + r.GetFenceId())
	}).To("joined")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(app.Groups()); got != 1 {
		t.Fatalf("%d groups, want the join's only (its sides' operators run in it)", got)
	}
	if d := app.Describe(); !strings.Contains(d, "Group j: reads left, right; writes joined; table j-table") {
		t.Fatalf("describe:\n%s", d)
	}
	d := streamstest.New(t, app, time.Unix(1_800_000_000, 0))
	k := &ksJoin{t: t, d: d, left: streamstest.InputTopic[ping](d, "left"), right: streamstest.InputTopic[trig](d, "right")}
	k.pipe1("k", "skip", 100)
	k.pipe1("k", "a", 105)
	k.pipe2("k", "x", 110)
	k.check("a at 105 joins x at 110; skip is filtered", "k:A+x")
}

// Build refuses a windowed join it cannot run, naming what is missing.
func TestJoinWindowedRefused(t *testing.T) {
	noop := func(*ping, *trig) *str { return nil }
	w := streams.JoinWindows(ms(10), 0)
	for _, tc := range []struct {
		name   string
		topo   func(*topology.Topology)
		define func(b *streams.Builder)
		want   []string
	}{
		{"no table, no timers", func(tp *topology.Topology) {
			tp.Topics = slices.DeleteFunc(tp.Topics, func(t topology.Topic) bool { return t.Name == "j-table" || t.Name == "j-timers" })
		}, nil, []string{"its table topic j-table is not declared (value fencestream.kit.v1.JoinBuffer", "its timer topic j-timers is not declared"}},
		{"no event time", nil, func(b *streams.Builder) {
			b.Stream[ping]("left").JoinWindowed(b.Stream[trig]("right", streams.EventTime(trigTime)), "j", w, noop).To("joined")
		}, []string{"source left (left side) has no EventTime"}},
		{"keyed otherwise", nil, func(b *streams.Builder) {
			b.Stream[ping]("left", streams.EventTime(pingTime)).JoinWindowed(b.Stream[trig]("right-by-fence", streams.EventTime(trigTime)), "j", w, noop).To("joined")
		}, []string{"left is keyed by id and right-by-fence by fence: both sides must be keyed alike"}},
		{"re-keyed side", nil, func(b *streams.Builder) {
			b.Stream[ping]("left", streams.EventTime(pingTime)).
				Map(func(k string, p *ping) (string, *ping) { return p.GetDeviceId(), p }).
				JoinWindowed(b.Stream[trig]("right", streams.EventTime(trigTime)), "j", w, noop).To("joined")
		}, []string{"its left side comes after Map or FlatMap"}},
		{"window of negative size", nil, func(b *streams.Builder) {
			b.Stream[ping]("left", streams.EventTime(pingTime)).
				JoinWindowed(b.Stream[trig]("right", streams.EventTime(trigTime)), "j", w.Before(ms(-20)), noop).To("joined")
		}, []string{"join window before -20ms plus after 10ms must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := joinTopology()
			if tc.topo != nil {
				tc.topo(topo)
			}
			b := streams.New(topo, "ssj", nil)
			if tc.define != nil {
				tc.define(b)
			} else {
				b.Stream[ping]("left", streams.EventTime(pingTime)).JoinWindowed(b.Stream[trig]("right", streams.EventTime(trigTime)), "j", w, noop).To("joined")
			}
			_, err := b.Build()
			if err == nil {
				t.Fatal("built")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q\n does not say %q", err, s)
				}
			}
		})
	}
}

// A stream joined with itself reads its source once: each record pairs with
// itself and, both ways, with the key's records within the window.
func TestJoinWindowedSelf(t *testing.T) {
	b := streams.New(joinTopology(), "ssj", nil)
	l := b.Stream[ping]("left", streams.EventTime(pingTime))
	l.JoinWindowed(l, "j", streams.JoinWindows(ms(10), 0), func(a, c *ping) *str {
		return wrapperspb.String(a.GetDeviceId() + "+" + c.GetDeviceId())
	}).To("joined")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, time.Unix(1_800_000_000, 0))
	k := &ksJoin{t: t, d: d, left: streamstest.InputTopic[ping](d, "left")}
	k.pipe1("k", "a", 100)
	k.pipe1("k", "b", 105)
	k.pipe1("k", "c", 200)
	var got []string
	for _, r := range streamstest.OutputTopic[str](d, "joined").Read() {
		got = append(got, r.Value.GetValue())
	}
	slices.Sort(got)
	want(t, got, "a+a", "a+b", "b+a", "b+b", "c+c")
}
