package group_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// BenchmarkCallback is the kit's per-record path through Goka's tester: an
// ordered input for one of 1,000 keys, its envelope read, the handler's state
// change and the envelope written; bare, and with the envelope and state
// caches the debouncer and occupancy use. The tester's own work is in it too,
// so compare allocs/op and ns/op of two builds, not with other benchmarks.
//
//	go test -run '^$' -bench Callback -benchmem ./processors/group/
func BenchmarkCallback(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchCallback(b, false) })
	b.Run("cached", func(b *testing.B) { benchCallback(b, true) })
}

func benchCallback(b *testing.B, cached bool) {
	tt := tester.New(b)
	var opts []group.Opt
	if cached {
		opts = append(opts, group.CacheEnvelopes(1<<20), group.CacheStates(1<<20))
	}
	g := group.New[state](testTopology(2), testGroup, quiet, opts...)
	group.Output[testpb.Trigger](g, topicOut)
	group.Stream(g, topicIn, func(c *ctxT, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &testpb.DeviceState{DeviceId: c.Key()}
		}
		st.Pings++
		st.LastHlc = p.GetHlc()
		c.SetState(st)
		return nil
	}, group.OrderedByHLC(func(p *testpb.Ping) uint64 { return p.GetHlc() }))
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	const keys = 1000
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = fmt.Sprintf("veh-%04d", i)
	}
	p := &testpb.Ping{Lat: 52.5, Lon: 13.4}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p.DeviceId, p.Hlc = ids[i%keys], uint64(1<<40+i)
		tt.Consume(topicIn, p.DeviceId, p)
	}
}
