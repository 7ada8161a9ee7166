package group_test

import (
	"context"
	"testing"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// BenchmarkRecordPath is one input through the kit's whole record path
// (admit, dedupe, run, commit, release) under Goka's tester, which adds its
// own synchronous bookkeeping: compare runs of one sitting only. changed: an
// ordered ping that sets the state and emits (the debouncer's shape);
// unchanged: a handler that reads the state and leaves it alone.
func BenchmarkRecordPath(b *testing.B) {
	for _, tc := range []struct {
		name   string
		handle func(outT, *ctxT, *testpb.Ping) error
	}{
		{"changed", func(out outT, c *ctxT, p *testpb.Ping) error {
			st := c.State()
			if st == nil {
				st = &testpb.DeviceState{DeviceId: c.Key()}
			}
			st.Pings++
			st.LastHlc = p.GetHlc()
			c.SetState(st)
			out.Emit(c, c.Key(), &testpb.Trigger{DeviceId: c.Key(), Hlc: p.GetHlc()})
			return nil
		}},
		{"unchanged", func(_ outT, c *ctxT, _ *testpb.Ping) error {
			_ = c.State()
			return nil
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tt := tester.New(b)
			proc, err := validGroupOut(testTopology(2), tc.handle, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() })).Processor(context.Background(), cluster.Config{}, group.Tester(tt))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- proc.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			out := tt.NewQueueTracker(topicOut)
			keys := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7"}
			pings := make([]*testpb.Ping, len(keys))
			for i, k := range keys {
				pings[i] = &testpb.Ping{DeviceId: k, Lat: 52.5, Lon: 13.4}
			}
			hlc := uint64(1 << 40)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := pings[i%len(pings)]
				hlc++
				p.Hlc = hlc
				tt.Consume(topicIn, p.GetDeviceId(), p)
				if i%1024 == 0 {
					out.Seek(out.Hwm()) // the tracker's queue is not this bench's cost
				}
			}
		})
	}
}
