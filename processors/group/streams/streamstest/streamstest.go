// Package streamstest drives a streams.App in a test without a broker, in
// the manner of Kafka Streams' TopologyTestDriver: pipe typed records into
// input topics, read typed records from output topics, read a table, move
// the wall clock and fire timers.
//
// Invariant: every call that waits for processing (Pipe, Read, Get,
// FireTimers) returns only once every group of the app has handled what it
// caused, or fails the test at once when a group has stopped (it never
// hangs until go test's timeout). Tables are read from the groups' own
// state, never through a view, so no view can start late and answer
// "recovering" for good.
package streamstest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
)

// Driver runs every group of an app on one Goka tester with one clock.
type Driver struct {
	t        testing.TB
	h        *grouptest.Harness
	app      *streams.App
	trackers map[string]*tester.QueueTracker
}

// New starts app's groups; the wall clock reads at until Advance moves it.
// They stop when the test ends.
func New(t testing.TB, app *streams.App, at time.Time, opts ...group.Opt) *Driver {
	t.Helper()
	d := &Driver{t: t, h: grouptest.New(t, at), app: app, trackers: map[string]*tester.QueueTracker{}}
	for _, g := range app.Groups() {
		d.h.Start(g, opts...)
	}
	return d
}

// Harness is the grouptest harness under the driver, for what the driver
// does not say (dead letters, a route test's tester).
func (d *Driver) Harness() *grouptest.Harness { return d.h }

// Advance moves the wall clock by by.
func (d *Driver) Advance(by time.Duration) { d.h.Advance(by) }

// FireTimers fires every due timer (by the wall clock and the partitions'
// stream time) and waits until their effects are handled.
func (d *Driver) FireTimers() { d.t.Helper(); d.h.FireTimers() }

// DeadLetters are the dead letters written since the last call.
func (d *Driver) DeadLetters() []grouptest.DeadLetter {
	d.t.Helper()
	return grouptest.DeadLetters(d.h)
}

// Input is a typed input topic.
type Input[V any] struct {
	d     *Driver
	topic string
}

// InputTopic is topic as an input of *V values; the topology must declare
// it with V and a group of the app must read it (Goka's tester would
// otherwise wait for a reader that never comes).
func InputTopic[V any](d *Driver, topic string) Input[V] {
	d.t.Helper()
	d.check(topic, nameOf[V](d.t))
	if !d.uses(topic, func(p topology.Processor) []string { return p.Streams }) {
		d.t.Fatalf("streamstest: no group of the app reads %s, so nothing would handle what is piped there", topic)
	}
	return Input[V]{d: d, topic: topic}
}

func (d *Driver) uses(topic string, edges func(topology.Processor) []string) bool {
	for _, g := range d.app.Groups() {
		p, _ := d.app.Topology().Processor(g.Name())
		if slices.Contains(edges(p), topic) {
			return true
		}
	}
	return false
}

func (d *Driver) check(topic, typ string) {
	d.t.Helper()
	tp, ok := d.app.Topology().Topic(topic)
	switch {
	case !ok:
		d.t.Fatalf("streamstest: topic %s is not declared", topic)
	case tp.Value != typ:
		d.t.Fatalf("streamstest: topic %s holds %s, not %s", topic, tp.Value, typ)
	}
}

// Pipe writes one record and waits until the app has handled it and all it
// caused. A nil v is a tombstone.
func (in Input[V]) Pipe(key string, v *V) {
	in.d.t.Helper()
	var raw any
	if v != nil {
		b, err := proto.Marshal(any(v).(proto.Message))
		if err != nil {
			in.d.t.Fatalf("streamstest: %s: %v", in.topic, err)
		}
		raw = b
	}
	in.d.h.Consume(in.topic, key, raw)
}

// Record is one record read from an output topic.
type Record[V any] struct {
	Key   string
	Value *V // nil for a tombstone
}

// Output is a typed output topic.
type Output[V any] struct {
	d     *Driver
	topic string
}

// OutputTopic is topic as an output of *V values; a group of the app must
// write it.
func OutputTopic[V any](d *Driver, topic string) Output[V] {
	d.t.Helper()
	d.check(topic, nameOf[V](d.t))
	if !d.uses(topic, func(p topology.Processor) []string { return p.Emits }) {
		d.t.Fatalf("streamstest: no group of the app writes %s", topic)
	}
	return Output[V]{d: d, topic: topic}
}

// Read returns the records written since the last Read (the first returns
// all), once the app has handled everything piped so far.
func (o Output[V]) Read() []Record[V] {
	o.d.t.Helper()
	o.d.h.Catchup()
	tr, ok := o.d.trackers[o.topic]
	if !ok {
		tr = o.d.h.TT.NewQueueTracker(o.topic)
		tr.Seek(0)
		o.d.trackers[o.topic] = tr
	}
	var out []Record[V]
	for {
		_, key, raw, ok := tr.NextRawWithHeaders()
		if !ok {
			return out
		}
		r := Record[V]{Key: key}
		if raw != nil {
			v := new(V)
			if err := proto.Unmarshal(raw, any(v).(proto.Message)); err != nil {
				o.d.t.Fatalf("streamstest: %s record %q: %v", o.topic, key, err)
			}
			r.Value = v
		}
		out = append(out, r)
	}
}

// Get is table t's value for key (nil when it has none), once the app has
// handled everything piped so far.
func Get[V any](d *Driver, t streams.Table[V], key string) *V {
	d.t.Helper()
	if t.Stored() == "" {
		d.t.Fatalf("streamstest: a table derived from %s by Filter or MapValues is stored nowhere: read %[1]s, or its stream", t.Name())
	}
	if t.Stored() != nameOf[V](d.t) {
		d.t.Fatalf("streamstest: table %s holds %s, not %s (a windowed table: read it with Windows, or Stored)", t.Name(), t.Stored(), nameOf[V](d.t))
	}
	d.h.Catchup()
	st, err := group.StateOf[state[V], *state[V]](d.h.TT.TableValue(goka.Table(t.Name()), key))
	if err != nil {
		d.t.Fatalf("streamstest: %s[%q]: %v", t.Name(), key, err)
	}
	if st == nil {
		return nil
	}
	return st.v
}

// Stored is what table t stores for key, a *A (nil when it has none), once
// the app has handled everything piped so far: for a windowed Aggregate,
// the app's own message holding the windows (t's values are the windows'
// results); for any aggregation's own table, what Get reads.
func Stored[A, V any](d *Driver, t streams.Table[V], key string) *A {
	d.t.Helper()
	if t.Stored() != nameOf[A](d.t) {
		d.t.Fatalf("streamstest: table %s stores %s, not %s", t.Name(), t.Stored(), nameOf[A](d.t))
	}
	d.h.Catchup()
	st, err := group.StateOf[state[A], *state[A]](d.h.TT.TableValue(goka.Table(t.Name()), key))
	if err != nil {
		d.t.Fatalf("streamstest: %s[%q]: %v", t.Name(), key, err)
	}
	if st == nil {
		return nil
	}
	return st.v
}

// state is *V as the kit's typed helpers want it (streams keeps its own).
type state[V any] struct{ v *V }

func (s *state[V]) ProtoReflect() protoreflect.Message {
	if s.v == nil {
		s.v = new(V)
	}
	return any(s.v).(proto.Message).ProtoReflect()
}

func nameOf[V any](t testing.TB) string {
	m, ok := any(new(V)).(proto.Message)
	if !ok {
		t.Fatalf("streamstest: %s is not a protobuf message", reflect.TypeFor[V]())
	}
	return string(m.ProtoReflect().Descriptor().FullName())
}

// Windows is a windowed table's windows for key, oldest first, once the app
// has handled everything piped so far.
func Windows(d *Driver, t streams.Table[wrapperspb.Int64Value], key string) []windows.Window[emptypb.Empty, *emptypb.Empty] {
	d.t.Helper()
	d.h.Catchup()
	st, err := group.StateOf[kitpb.WindowSet](d.h.TT.TableValue(goka.Table(t.Name()), key))
	if err != nil {
		d.t.Fatalf("streamstest: %s[%q]: %v", t.Name(), key, err)
	}
	ws, err := windows.WindowsOf[emptypb.Empty](st)
	if err != nil {
		d.t.Fatalf("streamstest: %s[%q]: %v", t.Name(), key, err)
	}
	return ws
}
