package group_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// counting applies every ping to its device's state and emits one trigger per
// ping whose id depends on the state (the device's ping count), so a ping
// applied twice would emit a different record.
type counting struct{ calls atomic.Int64 }

func (h *counting) handle(out outT, c *ctxT, p *testpb.Ping) error {
	h.calls.Add(1)
	st := c.State()
	if st == nil {
		st = &testpb.DeviceState{DeviceId: c.Key()}
	}
	st.Pings++
	st.LastHlc = p.GetHlc()
	c.SetState(st)
	out.Emit(c, c.Key(), &testpb.Trigger{TriggerId: fmt.Sprintf("%s|%d", c.Key(), st.Pings), DeviceId: c.Key(), Hlc: p.GetHlc()})
	return nil
}

// runFor runs proc until cond holds, then stops it gracefully.
func runFor(t *testing.T, proc *group.Processor, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("%s: not reached within 2 minutes", what)
		}
		select {
		case err := <-done:
			t.Fatalf("%s: processor stopped: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("%s: stop: %v", what, err)
	}
}

// TestRedeliveryReemitsOutputs breaks the crash window on purpose: the state
// holds inputs whose offsets were never committed (what kill -9 between a state
// write and the offset commit leaves, on this instance or, through the
// changelog, on the one taking the partition over). The redelivered inputs must
// not be applied again, and must produce exactly the records they produced the
// first time.
func TestRedeliveryReemitsOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	for _, tc := range []struct {
		name      string
		ordered   bool
		freshDisk bool // the partition is taken over: state comes from the changelog
	}{
		{"by offset, same instance", false, false},
		{"by HLC, same instance", true, false},
		{"by offset, takeover from the changelog", false, true},
		{"by HLC, takeover from the changelog", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := embeddedtest.Cluster(t)
			topo := testTopology(2)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
			adm := kadm.NewClient(kc)
			if err := topo.Ensure(ctx, adm); err != nil {
				t.Fatal(err)
			}
			const devices, perDevice = 8, 5
			for i := range perDevice {
				for d := range devices {
					v, _ := proto.Marshal(&testpb.Ping{DeviceId: fmt.Sprint("d", d), Hlc: uint64(100 + i)})
					if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topicIn, Key: []byte(fmt.Sprint("d", d)), Value: v}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			h := &counting{}
			var opts []group.StreamOpt[testpb.Ping, *testpb.Ping]
			if tc.ordered {
				opts = append(opts, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() }))
			}
			stateDir := t.TempDir()
			build := func(dir string) *group.Processor {
				// Deleting the group's offsets below is a reset, which an
				// envelope trimmed to its uncommitted inputs cannot cover:
				// with commits unknown the replay window keeps all of them,
				// as it would for inputs since the last commit.
				proc, err := validGroupOut(topo, h.handle, opts...).Processor(ctx, cluster.Config{Brokers: cl.Brokers}, group.StateDir(dir), group.CommittedOffsets(commitsUnknown))
				if err != nil {
					t.Fatal(err)
				}
				return proc
			}
			const total = devices * perDevice
			runFor(t, build(stateDir), "first run", func() bool { return h.calls.Load() == total && endOffsets(t, adm, topicOut) == total })

			// Forget the commits: every input is delivered again.
			if _, err := adm.DeleteGroup(ctx, testGroup); err != nil {
				t.Fatal(err)
			}
			dir := stateDir
			if tc.freshDisk {
				dir = filepath.Join(t.TempDir(), "other-instance")
			}
			runFor(t, build(dir), "redelivery", func() bool { return endOffsets(t, adm, topicOut) == 2*total })
			if got := h.calls.Load(); got != total {
				t.Errorf("handler called %d times, want %d: redelivered inputs were applied again", got, total)
			}

			recs := embeddedtest.ConsumeUntil(t, cl, topicOut, func(r []*kgo.Record) bool { return len(r) == 2*total })
			byKey := map[string][][]byte{}
			for _, r := range recs {
				byKey[string(r.Key)] = append(byKey[string(r.Key)], r.Value)
			}
			for k, vals := range byKey {
				if len(vals) != 2*perDevice {
					t.Errorf("%s: %d outputs, want %d", k, len(vals), 2*perDevice)
					continue
				}
				for i := range perDevice {
					if !bytes.Equal(vals[i], vals[perDevice+i]) {
						t.Errorf("%s: output %d of the redelivery differs from the original", k, i)
					}
				}
			}
		})
	}
}

func commitsUnknown(string, int32) (int64, bool) { return 0, false }

// TestRedeliveryBeyondTheWindowIsCounted redelivers every input of an ordered
// stream from further back than the replay window (the group's offsets are
// deleted): each is recognised by its position as applied — never
// dead-lettered as stale — and either re-emitted (the last window of each key)
// or counted as beyond-window.
func TestRedeliveryBeyondTheWindowIsCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	cl := embeddedtest.Cluster(t)
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := embeddedtest.Client(t, cl, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	adm := kadm.NewClient(kc)
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	const devices, perDevice, window = 4, 6, 2
	for i := range perDevice {
		for d := range devices {
			v, _ := proto.Marshal(&testpb.Ping{DeviceId: fmt.Sprint("d", d), Hlc: uint64(100 + i)})
			if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topicIn, Key: []byte(fmt.Sprint("d", d)), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := &counting{}
	stateDir := t.TempDir()
	build := func() *group.Processor {
		proc, err := validGroupOut(topo, h.handle, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() })).Processor(ctx, cluster.Config{Brokers: cl.Brokers},
			group.StateDir(stateDir), group.ReplayWindow(window), group.CommittedOffsets(commitsUnknown))
		if err != nil {
			t.Fatal(err)
		}
		return proc
	}
	const total = devices * perDevice
	runFor(t, build(), "first run", func() bool { return h.calls.Load() == total && endOffsets(t, adm, topicOut) == total })
	if _, err := adm.DeleteGroup(ctx, testGroup); err != nil {
		t.Fatal(err)
	}
	beyond0, reemitted0 := replayCount(t, "beyond-window"), replayCount(t, "re-emitted")
	proc := build()
	emitted := 0
	runFor(t, proc, "redelivery", func() bool {
		n, _ := proc.Processed(topicIn)
		emitted = proc.Emitted(topicOut)
		return n == total && endOffsets(t, adm, topicOut) == total+devices*window
	})
	if emitted != devices*window {
		t.Errorf("Emitted(%s) = %d after the redelivery, want the %d re-emitted outputs", topicOut, emitted, devices*window)
	}
	if got := h.calls.Load(); got != total {
		t.Errorf("handler called %d times, want %d", got, total)
	}
	if n := endOffsets(t, adm, "deadletter"); n != 0 {
		t.Errorf("%d redelivered inputs dead-lettered, want none", n)
	}
	if got := replayCount(t, "beyond-window") - beyond0; got != devices*(perDevice-window) {
		t.Errorf("beyond-window counted %v, want %d", got, devices*(perDevice-window))
	}
	if got := replayCount(t, "re-emitted") - reemitted0; got != devices*window {
		t.Errorf("re-emitted counted %v, want %d", got, devices*window)
	}
}

// replayCount reads fencestream_replayed_inputs_total of the test group's input.
func replayCount(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fencestream_replayed_inputs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == testGroup && labels["topic"] == topicIn && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
