package windows_test

import (
	"context"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology/cluster"
)

// BenchmarkWindowsAdd is one record through a group whose handler adds it to
// hopping windows (Goka's tester): the record path of a windowed operator,
// stream time, the close timer and its state write included. Its allocs/op
// is the figure to compare across changes of the kit's seam.
func BenchmarkWindowsAdd(b *testing.B) {
	tt := tester.New(b)
	g := group.New[kitpb.WindowSet](windowTopology(), testGroup, quiet)
	group.Output[testpb.Trigger](g, topicOut)
	w := windows.NewWindows[testpb.Ping](g, "pings", windows.Hopping(time.Minute, 30*time.Second, 10*time.Second),
		func(ws *kitpb.WindowSet) *kitpb.WindowSet { return ws }, nil)
	group.Stream(g, topicIn, func(c *wsCtx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		if err := w.Add(c, st, c.EventTime(), p.GetLat(), nil); err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	wall := time.UnixMilli(base).Add(48 * time.Hour)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	p := &testpb.Ping{DeviceId: "k", Lat: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		p.DeviceTimeMs = base + int64(i)*1000
		tt.Consume(topicIn, "k", p)
	}
}
