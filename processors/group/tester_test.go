package group_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/protobuf/proto"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// auditor is a handler that applies every ping it is given (the kit orders
// them by HLC), records the HLCs it saw, rejects device "reject" and emits
// device "emit-empty"'s output under an empty key.
type auditor struct {
	mu      sync.Mutex
	audits  []uint64
	headers []string
}

func (a *auditor) handle(out outT, c *ctxT, p *testpb.Ping) error {
	a.mu.Lock()
	a.headers = append(a.headers, string(c.Header("trace")))
	a.mu.Unlock()
	switch p.GetDeviceId() {
	case "reject":
		return fmt.Errorf("ping of %s is out of range", c.Key())
	case "emit-empty":
		out.Emit(c, "", &testpb.Trigger{DeviceId: p.GetDeviceId()})
		return nil
	}
	st := c.State()
	if st == nil {
		st = &testpb.DeviceState{DeviceId: c.Key()}
	}
	a.mu.Lock()
	a.audits = append(a.audits, p.GetHlc())
	a.mu.Unlock()
	st.LastHlc = p.GetHlc()
	st.Pings++
	st.Partition = c.Partition()
	c.SetState(st)
	out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), Hlc: p.GetHlc()})
	return nil
}

func (a *auditor) takeAudits() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.audits
	a.audits = nil
	return out
}

type harness struct {
	tt   *tester.Tester
	a    *auditor
	out  *tester.QueueTracker
	dlq  *tester.QueueTracker
	proc *group.Processor
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{tt: tester.New(t), a: &auditor{}}
	proc, err := validGroupOut(testTopology(2), h.a.handle, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() })).Processor(context.Background(), cluster.Config{}, group.Tester(h.tt))
	if err != nil {
		t.Fatal(err)
	}
	h.proc = proc
	runUntilCleanup(t, proc.Run)
	h.out = h.tt.NewQueueTracker(topicOut)
	h.dlq = h.tt.NewQueueTracker("deadletter")
	return h
}

// runUntilCleanup runs fn in a goroutine until the test ends, then cancels it
// and expects a clean stop within a deadline.
func runUntilCleanup(t *testing.T, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("did not stop within 30s")
		}
	})
}

type deadLetter struct {
	key     string
	value   []byte
	headers goka.Headers
}

func (h *harness) nextDeadLetter(t *testing.T) deadLetter {
	t.Helper()
	hdrs, key, raw, ok := h.dlq.NextRawWithHeaders()
	if !ok {
		t.Fatal("no dead letter")
	}
	return deadLetter{key: key, value: raw, headers: hdrs}
}

func (h *harness) noMore(t *testing.T) {
	t.Helper()
	if k, v, ok := h.dlq.NextRaw(); ok {
		t.Errorf("unexpected dead letter %q = %x", k, v)
	}
	if k, v, ok := h.out.Next(); ok {
		t.Errorf("unexpected output %q = %v", k, v)
	}
}

func checkDeadLetter(t *testing.T, dl deadLetter, key, reason, errPart string, orig *testpb.Ping) {
	t.Helper()
	if dl.key != key {
		t.Errorf("dead letter key %q, want the original %q", dl.key, key)
	}
	if got := string(dl.headers[deadletter.HeaderReason]); got != reason {
		t.Errorf("reason %q, want %q", got, reason)
	}
	if got := string(dl.headers[deadletter.HeaderError]); !strings.Contains(got, errPart) {
		t.Errorf("error header %q does not contain %q", got, errPart)
	}
	if got := string(dl.headers[deadletter.HeaderSourceTopic]); got != topicIn {
		t.Errorf("source topic header %q", got)
	}
	if got := string(dl.headers[deadletter.HeaderGroup]); got != testGroup {
		t.Errorf("group header %q", got)
	}
	if string(dl.headers[deadletter.HeaderSourcePartition]) == "" || string(dl.headers[deadletter.HeaderSourceOffset]) == "" {
		t.Errorf("source partition/offset headers missing: %v", dl.headers)
	}
	if orig == nil {
		if len(dl.value) != 0 {
			t.Errorf("dead letter of an empty value carries %x", dl.value)
		}
		return
	}
	var got testpb.Ping
	if err := proto.Unmarshal(dl.value, &got); err != nil {
		t.Fatalf("dead-letter value is not the original ping: %v", err)
	}
	if !proto.Equal(&got, orig) {
		t.Errorf("dead-letter value %v, want the original %v", &got, orig)
	}
}

func TestHandlerErrorDeadLettersInvalid(t *testing.T) {
	h := newHarness(t)
	bad := &testpb.Ping{DeviceId: "reject", Lat: 91, Lon: 13, Hlc: 7}
	h.tt.Consume(topicIn, "reject", bad)
	checkDeadLetter(t, h.nextDeadLetter(t), "reject", deadletter.ReasonInvalid, "ping of reject is out of range", bad)
	h.noMore(t)

	// Processing continues with the next record.
	h.tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 1})
	if k, v, ok := h.out.Next(); !ok || k != "d1" || v.(*testpb.Trigger).GetHlc() != 1 {
		t.Fatalf("after a rejected record: output %q %v %v", k, v, ok)
	}
}

func TestEmitEmptyKeyDeadLetters(t *testing.T) {
	h := newHarness(t)
	p := &testpb.Ping{DeviceId: "emit-empty", Hlc: 3}
	h.tt.Consume(topicIn, "emit-empty", p)
	checkDeadLetter(t, h.nextDeadLetter(t), "emit-empty", deadletter.ReasonBadEmitKey, "emit to "+topicOut, p)
	h.noMore(t) // nothing reached the output topic
}

func TestBadInputKeyAndNullValueDeadLetter(t *testing.T) {
	h := newHarness(t)
	p := &testpb.Ping{DeviceId: "d1", Hlc: 1}
	h.tt.Consume(topicIn, "", p)
	checkDeadLetter(t, h.nextDeadLetter(t), "", deadletter.ReasonEmptyKey, "", p)
	h.noMore(t)
	if audits := h.a.takeAudits(); len(audits) != 0 {
		t.Errorf("the handler saw a dead-lettered record: %v", audits)
	}

	// A null value (tombstone) on a stream never reaches the handler: it is
	// dead-lettered as an empty value and does not stop the processor.
	h.tt.Consume(topicIn, "d2", nil)
	checkDeadLetter(t, h.nextDeadLetter(t), "d2", deadletter.ReasonEmptyValue, "no value", nil)
	h.tt.Consume(topicIn, "d2", &testpb.Ping{DeviceId: "d2", Hlc: 4})
	if k, _, ok := h.out.Next(); !ok || k != "d2" {
		t.Fatalf("after a null value: output %q %v", k, ok)
	}
	if audits := h.a.takeAudits(); len(audits) != 1 {
		t.Errorf("handler calls after a null value and a ping: %d, want 1", len(audits))
	}
}

// An ordered stream: a lower HLC is dead-lettered as stale, the same HLC again
// is the same input (its output is re-emitted, the handler never sees it), and
// the state only reflects inputs applied once.
func TestOrderedByHLC(t *testing.T) {
	h := newHarness(t)
	send := func(hlc uint64) {
		h.tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: hlc}, tester.WithHeaders(goka.Headers{"trace": []byte(fmt.Sprint("t", hlc))}))
	}
	for _, hlc := range []uint64{10, 5, 10, 11} {
		send(hlc)
	}
	if got := h.a.takeAudits(); fmt.Sprint(got) != "[10 11]" {
		t.Fatalf("handler saw HLCs %v, want [10 11]", got)
	}
	st, err := group.StateOf[testpb.DeviceState](h.tt.TableValue(goka.Table(topicTab), "d1"))
	if err != nil || st.GetLastHlc() != 11 || st.GetPings() != 2 {
		t.Fatalf("state %v (%v): want last_hlc 11, 2 applied", st, err)
	}
	var hlcs []uint64
	for {
		_, v, ok := h.out.Next()
		if !ok {
			break
		}
		hlcs = append(hlcs, v.(*testpb.Trigger).GetHlc())
	}
	if fmt.Sprint(hlcs) != "[10 10 11]" {
		t.Errorf("outputs for HLCs %v, want [10 10 11] (10 replayed)", hlcs)
	}
	checkDeadLetter(t, h.nextDeadLetter(t), "d1", deadletter.ReasonStale, "last applied 10, got 5", &testpb.Ping{DeviceId: "d1", Hlc: 5})
	h.noMore(t)
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	if strings.Join(h.a.headers, ",") != "t10,t11" {
		t.Errorf("handler saw headers %v", h.a.headers)
	}
}

// A replay is recognised by its position or its exact bytes, never by the HLC
// alone: another ping with the HLC of the last applied one is dead-lettered
// (duplicate-hlc), the same ping produced again is replayed.
func TestDuplicateHLCIsDeadLettered(t *testing.T) {
	h := newHarness(t)
	first := &testpb.Ping{DeviceId: "d1", Hlc: 10, Lat: 52.5}
	other := &testpb.Ping{DeviceId: "d1", Hlc: 10, Lat: 52.6}
	h.tt.Consume(topicIn, "d1", first)
	h.tt.Consume(topicIn, "d1", other)
	checkDeadLetter(t, h.nextDeadLetter(t), "d1", deadletter.ReasonDuplicateHLC, "different record", other)
	h.tt.Consume(topicIn, "d1", first) // produced twice: a replay
	if got := h.a.takeAudits(); fmt.Sprint(got) != "[10]" {
		t.Fatalf("handler saw HLCs %v, want [10]", got)
	}
	for i := range 2 {
		if _, v, ok := h.out.Next(); !ok || v.(*testpb.Trigger).GetHlc() != 10 {
			t.Fatalf("output %d: %v %v, want the trigger of HLC 10 (then its replay)", i, v, ok)
		}
	}
	h.noMore(t)
}

func TestViewGetOnTester(t *testing.T) {
	h := newHarness(t)
	v, err := view.New[testpb.DeviceState](cluster.Config{}, topicTab, view.Tester(h.tt))
	if err != nil {
		t.Fatal(err)
	}
	if v.Topic() != topicTab {
		t.Errorf("Topic() = %q", v.Topic())
	}
	if _, err := v.Get("d1"); !errors.Is(err, view.ErrNotRecovered) {
		t.Fatalf("Get before Run: %v, want ErrNotRecovered", err)
	}
	runUntilCleanup(t, v.Run)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := v.WaitRecovered(ctx); err != nil {
		t.Fatal(err)
	}

	// State written by the processor is visible, typed.
	h.tt.Consume(topicIn, "d1", &testpb.Ping{DeviceId: "d1", Hlc: 42})
	st, err := v.Get("d1")
	if err != nil || st.GetLastHlc() != 42 || st.GetDeviceId() != "d1" {
		t.Fatalf("Get(d1) = %v, %v", st, err)
	}
	h.tt.SetTableValue(goka.Table(topicTab), "d2", &testpb.DeviceState{DeviceId: "d2", Pings: 5})
	if st, err := v.Get("d2"); err != nil || st.GetPings() != 5 {
		t.Fatalf("Get(d2) = %v, %v", st, err)
	}
	if st, err := v.Get("missing"); err != nil || st != nil {
		t.Fatalf("Get(missing) = %v, %v; want nil, nil", st, err)
	}
	seen := map[string]uint64{}
	if err := v.Each(func(k string, s *testpb.DeviceState) bool { seen[k] = s.GetPings(); return true }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen["d1"] != 1 || seen["d2"] != 5 {
		t.Fatalf("Each saw %v", seen)
	}
	n := 0
	if err := v.Each(func(string, *testpb.DeviceState) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("Each stopping early: %d visits, %v", n, err)
	}
}

// The tester validates the topology as a broker start does: an undeclared
// re-key is refused, not discovered in production.
func TestTesterValidatesTopology(t *testing.T) {
	topo := testTopology(2)
	for i := range topo.Topics {
		if topo.Topics[i].Name == topicOut {
			topo.Topics[i].Key = "fence_id" // pings keyed by device -> out keyed by fence: a re-key
		}
	}
	_, err := validGroup(topo, ignorePing).Processor(context.Background(), cluster.Config{}, group.Tester(tester.New(t)))
	if !errors.Is(err, topology.ErrUndeclaredRekey) {
		t.Fatalf("Processor with the tester = %v, want ErrUndeclaredRekey", err)
	}
}
