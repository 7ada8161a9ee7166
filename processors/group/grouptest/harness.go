package grouptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Builder is a group under construction (*group.Group of any state type).
type Builder interface {
	Name() string
	Processor(ctx context.Context, cl cluster.Config, opts ...group.Opt) (*group.Processor, error)
}

// Harness runs several groups on one Goka tester with one fixed clock, the
// way a processor's tests need them: feed records, fire timers, drain
// topics, read typed state.
//
// The groups' record cache (group.RecordCache, on by default) is off on the
// tester: Goka's tester commits nothing, so the cache could never flush, and
// every table write reaches the table (State, views on the tester) as the
// record that made it is handled.
//
// Invariant: a processor that stops while the test runs fails the test at
// the next call that waits for processing (Consume, Catchup, FireTimers)
// instead of leaving it to hang until go test's timeout.
type Harness struct {
	t  testing.TB
	TT *tester.Tester

	mu       sync.Mutex
	now      time.Time
	procs    []*group.Processor
	names    []string
	tables   []string    // the group tables of the processors started
	stopped  chan string // the name of a processor whose Run returned early
	trackers map[string]*tester.QueueTracker
}

// New starts a harness whose clock reads at until Advance or SetNow move it.
func New(t testing.TB, at time.Time) *Harness {
	t.Helper()
	return &Harness{t: t, TT: tester.New(t), now: at, stopped: make(chan string, 16), trackers: map[string]*tester.QueueTracker{}}
}

// Now is the harness clock: the wall clock every processor it runs sees.
func (h *Harness) Now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// SetNow sets the clock.
func (h *Harness) SetNow(at time.Time) {
	h.mu.Lock()
	h.now = at
	h.mu.Unlock()
}

// Advance moves the clock by d.
func (h *Harness) Advance(d time.Duration) { h.SetNow(h.Now().Add(d)) }

// Start builds g's processor on the harness's tester and clock (opts come
// after them, so a test may override either) and runs it until the test
// ends.
func (h *Harness) Start(g Builder, opts ...group.Opt) *group.Processor {
	h.t.Helper()
	all := append([]group.Opt{group.Tester(h.TT), group.Now(h.Now)}, opts...)
	p, err := g.Processor(context.Background(), cluster.Config{}, all...)
	if err != nil {
		h.t.Fatalf("grouptest: building %s: %v", g.Name(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	name := g.Name()
	go func() {
		err := p.Run(ctx)
		if ctx.Err() == nil {
			h.t.Errorf("grouptest: processor %s stopped while the test ran: %v", name, err)
			h.stopped <- name
		}
		done <- err
	}()
	h.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				h.t.Errorf("grouptest: processor %s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			h.t.Errorf("grouptest: processor %s did not stop within 30 s", name)
		}
	})
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.names = append(h.names, name)
	if d, ok := g.(interface {
		Declaration() (topology.Processor, error)
	}); ok {
		if decl, err := d.Declaration(); err == nil && decl.Table != "" {
			h.tables = append(h.tables, decl.Table)
		}
	}
	h.mu.Unlock()
	return p
}

// wait runs fn (which waits on the tester) and fails the test at once if a
// processor stops meanwhile: the tester would wait for it forever. A panic of
// the tester's (it panics on a consumer session a stopped processor left
// behind) fails the test instead of crashing the test binary.
func (h *Harness) wait(what string, fn func()) {
	h.t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	tick := time.NewTicker(startupPoll)
	defer tick.Stop()
	var since time.Time // since when every poll found the tester waiting for a consumer
	for {
		select {
		case r := <-done:
			h.failed(what, r)
			return
		case name := <-h.stopped:
			h.stopped <- name // later waits fail too
			h.t.Fatalf("grouptest: %s: processor %s stopped, so it would never finish", what, name)
		case <-tick.C:
			if !waitingForStartup() {
				since = time.Time{}
				continue
			}
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) >= StartupWait {
				h.t.Fatalf("grouptest: %s: Goka's tester has waited %v for a consumer that never started: a view built on "+
					"this harness's tester (view.Tester(h.TT), or a route built with it) whose Run had not started; "+
					"build views with grouptest.View and routes with Harness.Route, which start them at once", what, StartupWait)
			}
		}
	}
}

// StartupWait is how long a Consume, Catchup or FireTimers may wait for a view
// built on the tester to start before the test fails (Goka's tester alone
// waits forever, silently).
const StartupWait = 5 * time.Second

const startupPoll = 250 * time.Millisecond

// waitingForStartup reports whether a goroutine is in Goka's tester waiting
// for a registered consumer to start. The tester offers no way to ask, so
// this reads the goroutines' stacks; it only decides which failure to report.
func waitingForStartup() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Contains(buf[:n], []byte("waitRequiredConsumersStartup"))
		}
		buf = make([]byte, 2*len(buf))
	}
}

// failed reports what fn's recover() returned, if anything.
func (h *Harness) failed(what string, r any) {
	h.t.Helper()
	if r == nil {
		return
	}
	// The tester panics on what a failing processor leaves behind,
	// often just before its Run returns: name the processor if it does.
	select {
	case name := <-h.stopped:
		h.stopped <- name
		h.t.Fatalf("grouptest: %s: processor %s stopped, so it would never finish (Goka's tester then panicked: %v)", what, name, r)
	case <-time.After(10 * time.Second):
		h.t.Fatalf("grouptest: %s: Goka's tester panicked: %v", what, r)
	}
}

// Consume feeds one record (a proto message, or nil for a tombstone) and
// waits until every processor has handled what it caused. The message is
// encoded here, so a group that reads the topic through a Go type of its own
// for the message (the stream DSL's groups do) takes it too.
func (h *Harness) Consume(topic, key string, msg any) {
	h.t.Helper()
	if m, ok := msg.(proto.Message); ok {
		b, err := proto.Marshal(m)
		if err != nil {
			h.t.Fatalf("grouptest: consume %s record %q: %v", topic, key, err)
		}
		msg = b
	}
	h.wait("consume "+topic, func() { h.TT.Consume(topic, key, msg) })
}

// Catchup waits until every processor has handled every record. Then the
// tester's copy of each table of the groups it runs is marked as
// read up to the table's last record when it holds what they say (as Goka
// does from a table's second write on, never after its first), so a view
// built after Catchup starts recovered even on a table written once.
func (h *Harness) Catchup() {
	h.t.Helper()
	h.wait("catchup", h.TT.Catchup)
	h.mu.Lock()
	tables := append([]string(nil), h.tables...)
	h.mu.Unlock()
	for _, tb := range tables {
		h.markReadIf(tb, false)
	}
}

// FireTimers fires every processor's due timers (those of groups with timers) (by the harness clock and
// the partitions' stream time) and waits until their ticks are handled.
func (h *Harness) FireTimers() {
	h.t.Helper()
	h.mu.Lock()
	procs := append([]*group.Processor(nil), h.procs...)
	names := append([]string(nil), h.names...)
	h.mu.Unlock()
	for i, p := range procs {
		var err error
		h.wait("fire timers of "+names[i], func() { err = p.FireTimers(context.Background()) })
		if errors.Is(err, group.ErrNoTimers) {
			continue // a group without timers has none to fire
		}
		if err != nil {
			h.t.Fatalf("grouptest: firing timers of %s: %v", names[i], err)
		}
	}
	h.Catchup()
}

// Record is one record drained from a topic.
type Record[PM any] struct {
	Key     string
	Value   PM // nil for a tombstone
	Headers map[string]string
}

// Drain returns the records written to topic since the last Drain of it (the
// first Drain returns every record the topic holds), decoded as *M.
func Drain[M any, PM codecs.Message[M]](h *Harness, topic string) []Record[PM] {
	h.t.Helper()
	h.Catchup()
	h.mu.Lock()
	tr, ok := h.trackers[topic]
	if !ok {
		tr = h.TT.NewQueueTracker(topic)
		tr.Seek(0)
		h.trackers[topic] = tr
	}
	h.mu.Unlock()
	var out []Record[PM]
	for {
		hdrs, key, raw, ok := tr.NextRawWithHeaders()
		if !ok {
			return out
		}
		r := Record[PM]{Key: key, Headers: map[string]string{}}
		for k, v := range hdrs {
			r.Headers[k] = string(v)
		}
		if raw != nil {
			v, err := codecs.For[M, PM]().Decode(raw)
			if err != nil {
				h.t.Fatalf("grouptest: %s record %q: %v", topic, key, err)
			}
			if p, ok := v.(*codecs.Poison); ok {
				h.t.Fatalf("grouptest: %s record %q is not a %T: %v", topic, key, r.Value, p.Err)
			}
			r.Value = v.(PM)
		}
		out = append(out, r)
	}
}

// DeadLetters drains the dead-letter topic: each record's key, reason and
// error (raw values, since a dead letter holds whatever could not be read).
func DeadLetters(h *Harness) []DeadLetter {
	h.t.Helper()
	h.Catchup()
	h.mu.Lock()
	tr, ok := h.trackers[topology.TopicDeadLetter]
	if !ok {
		tr = h.TT.NewQueueTracker(topology.TopicDeadLetter)
		tr.Seek(0)
		h.trackers[topology.TopicDeadLetter] = tr
	}
	h.mu.Unlock()
	var out []DeadLetter
	for {
		hdrs, key, raw, ok := tr.NextRawWithHeaders()
		if !ok {
			return out
		}
		out = append(out, DeadLetter{Key: key, Value: raw, Reason: string(hdrs[deadletter.HeaderReason]), Err: string(hdrs[deadletter.HeaderError])})
	}
}

// DeadLetter is one record of the dead-letter topic.
type DeadLetter struct {
	Key, Reason, Err string
	Value            []byte
}

// State is the application state the group table holds for key, or nil.
func State[S any, PS codecs.Message[S]](h *Harness, table, key string) PS {
	h.t.Helper()
	h.Catchup()
	st, err := group.StateOf[S, PS](h.TT.TableValue(goka.Table(table), key))
	if err != nil {
		h.t.Fatalf("grouptest: %s[%q]: %v", table, key, err)
	}
	return st
}

// KeyOn returns the first key prefix-0, prefix-1, … that the pinned
// partitioner puts on partition of a topic with partitions partitions.
// It returns "" for a partition outside [0, partitions).
func KeyOn(prefix string, partition, partitions int32) string {
	if partition < 0 || partition >= partitions {
		return ""
	}
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if topology.PartitionFor(k, partitions) == partition {
			return k
		}
	}
}
