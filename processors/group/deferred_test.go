package group_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// routing changes its device's state on every third ping (i = 0, 3, 6) and
// only emits on the others (a hop that routes); every output's id depends on
// the state, so an input run on the wrong state would emit another record.
type routing struct{ calls atomic.Int64 }

func (h *routing) handle(out outT, c *ctxT, p *testpb.Ping) error {
	h.calls.Add(1)
	i := p.GetHlc() - 100
	st := c.State()
	if st == nil {
		st = &testpb.DeviceState{DeviceId: c.Key()}
	}
	if i%3 == 0 {
		st.Pings++
		st.LastHlc = p.GetHlc()
		c.SetState(st)
	}
	out.Emit(c, c.Key(), &testpb.Trigger{TriggerId: fmt.Sprintf("%s|%d|%d", c.Key(), st.Pings, i), DeviceId: c.Key(), Hlc: p.GetHlc()})
	return nil
}

// TestRoutingHopsDeferTheirWrite: a callback that only emits does not rewrite
// its key's envelope (the changelog gets one record per state change, not one
// per input), and effectively-once holds: after every commit is forgotten,
// the redelivered inputs re-emit exactly what they emitted — the routing hops
// before a key's last write from the advances that write carried, the ones
// after it (whose advances died with the process) by running again on the
// state they first saw. Ordered inputs still write at every hop. With the
// record cache on, the key's writes between two flushes become one record.
func TestRoutingHopsDeferTheirWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	type variant struct {
		name      string
		ordered   bool
		freshDisk bool
		cache     bool // the record cache on (default), flushing only when the processor stops
	}
	var variants []variant
	for _, cache := range []bool{false, true} {
		for _, v := range []variant{
			{"by offset, same instance", false, false, cache},
			{"by offset, takeover from the changelog", false, true, cache},
			{"by HLC, same instance", true, false, cache},
		} {
			v.name = map[bool]string{false: "cache off, ", true: "cache on, "}[cache] + v.name
			variants = append(variants, v)
		}
	}
	for _, tc := range variants {
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
			const devices, perDevice = 8, 8 // per device: changes at 0, 3, 6; routes at 1, 2, 4, 5, 7
			const changes, trailing = 3, 1
			for i := range perDevice {
				for d := range devices {
					v, _ := proto.Marshal(&testpb.Ping{DeviceId: fmt.Sprint("d", d), Hlc: uint64(100 + i)})
					if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topicIn, Key: []byte(fmt.Sprint("d", d)), Value: v}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
			}
			h := &routing{}
			var opts []group.StreamOpt[testpb.Ping, *testpb.Ping]
			if tc.ordered {
				opts = append(opts, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() }))
			}
			build := func(dir string) *group.Processor {
				// With the cache off every write goes to the changelog; with it
				// on and an interval longer than the test, the one flush when
				// the processor stops writes each key once.
				cache := []group.Opt{group.RecordCache(0)}
				if tc.cache {
					cache = []group.Opt{group.RecordCache(group.DefaultRecordCache), group.CommitInterval(time.Hour)}
				}
				proc, err := validGroupOut(topo, h.handle, opts...).Processor(ctx, cluster.Config{Brokers: cl.Brokers},
					append(cache, group.StateDir(dir), group.CommittedOffsets(commitsUnknown))...)
				if err != nil {
					t.Fatal(err)
				}
				return proc
			}
			const total = devices * perDevice
			stateDir := t.TempDir()
			runFor(t, build(stateDir), "first run", func() bool { return h.calls.Load() == total && endOffsets(t, adm, topicOut) == total })
			wantWrites := int64(devices * changes)
			if tc.ordered {
				wantWrites = total
			}
			if tc.cache {
				wantWrites = devices // one per key: the cache coalesces a key's writes between flushes
			}
			if got := endOffsets(t, adm, topicTab); got != wantWrites {
				t.Errorf("table records = %d, want %d (cache off: one per state change, ordered: one per input; cache on: one per key)", got, wantWrites)
			}

			if _, err := adm.DeleteGroup(ctx, testGroup); err != nil {
				t.Fatal(err)
			}
			dir := stateDir
			if tc.freshDisk {
				dir = filepath.Join(t.TempDir(), "other-instance")
			}
			runFor(t, build(dir), "redelivery", func() bool { return endOffsets(t, adm, topicOut) == 2*total })
			wantCalls := int64(total)
			if !tc.ordered {
				wantCalls += devices * trailing
			}
			if got := h.calls.Load(); got != wantCalls {
				t.Errorf("handler called %d times, want %d (only the hops after each key's last write run again)", got, wantCalls)
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
