package windows_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// exampleT lets Goka's tester run inside an Example.
type exampleT struct{}

func (exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (exampleT) Fatal(a ...any)                    { panic(fmt.Sprint(a...)) }

// A processor with time, as processors/README.md builds it: ENTERs per fence
// per hour, in tumbling windows on the triggers' event time with a 10-minute
// grace. A stream-time timer closes each hour and its handler emits the final
// count; an ENTER for a closed hour is late.
func Example() {
	const (
		grp    = "hourly-enters"
		enters = "enters"        // ENTER triggers keyed by fence, read
		hourly = "enters-hourly" // one record per fence and closed hour, written
	)
	timers := topology.TimersTopicName(grp)
	// 1. Declaration: the topics and the group, with its timer topic.
	topo := &topology.Topology{
		Name: "example",
		Topics: []topology.Topic{
			{Name: enters, Key: "fence_id", Value: "fencestream.kit.test.v1.Trigger", Partitions: 1, Cleanup: topology.CleanupDelete},
			{Name: hourly, Key: "fence_id", Value: "fencestream.kit.test.v1.Occupancy", Partitions: 1, Cleanup: topology.CleanupDelete},
			{Name: grp + "-table", Key: "fence_id", Value: "fencestream.kit.v1.WindowSet", Partitions: 1, Cleanup: topology.CleanupCompact},
			topology.TimersTopic(grp, "fence_id", 1),
			{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 1, Cleanup: topology.CleanupDelete},
		},
		Processors: []topology.Processor{{
			Group: grp, Streams: []string{enters}, Emits: []string{hourly, topology.TopicDeadLetter},
			Table: grp + "-table", Timers: timers,
			Flows: []topology.Flow{
				{From: enters, To: grp + "-table"}, {From: enters, To: topology.TopicDeadLetter},
				{From: enters, To: hourly}, {From: timers, To: grp + "-table"}, {From: timers, To: hourly},
			},
		}},
	}
	// 2. Handlers: the state is the window set itself.
	type ctx = group.Context[kitpb.WindowSet, *kitpb.WindowSet]
	g := group.New[kitpb.WindowSet](topo, grp, slog.New(slog.DiscardHandler))
	hours := group.Output[testpb.Occupancy](g, hourly)
	perHour := windows.NewWindows(g, "enters", windows.Tumbling(time.Hour, 10*time.Minute),
		func(st *kitpb.WindowSet) *kitpb.WindowSet { return st },
		func(c *ctx, _ *kitpb.WindowSet, w windows.Window[testpb.Trigger, *testpb.Trigger]) error {
			hours.Emit(c, c.Key(), &testpb.Occupancy{FenceId: c.Key(), EntersTotal: uint64(w.Count), LastChangeMs: w.End.UnixMilli()})
			return nil
		})
	group.Stream(g, enters, func(c *ctx, t *testpb.Trigger) error {
		st := c.State()
		if st == nil {
			st = &kitpb.WindowSet{}
		}
		if err := perHour.Add(c, st, c.EventTime(), 1, nil); errors.Is(err, windows.ErrLate) {
			fmt.Println("late:", t.GetTriggerId())
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(t *testpb.Trigger) time.Time { return time.UnixMilli(t.GetEventTimeMs()) }))

	// 3. Run it on Goka's tester (a test would use tester.New(t)).
	tt := tester.New(exampleT{})
	t0 := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt),
		group.Clock(func() time.Time { return t0.Add(24 * time.Hour) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(runCtx) }()
	defer func() { stop(); <-done }()
	out := tt.NewQueueTracker(hourly)
	enter := func(id, fence string, at time.Duration) {
		tt.Consume(enters, fence, &testpb.Trigger{TriggerId: id, FenceId: fence, Type: testpb.TriggerType_TRIGGER_TYPE_ENTER, EventTimeMs: t0.Add(at).UnixMilli()})
	}
	enter("a", "depot", 5*time.Minute)
	enter("b", "depot", 40*time.Minute)
	enter("c", "depot", 65*time.Minute) // stream time 09:05: 08:00 is in its grace
	enter("d", "depot", 55*time.Minute) // out of order but in time
	enter("e", "depot", 72*time.Minute) // stream time 09:12: 08:00 may close
	// The processor does this every TimerInterval; under the tester, we do.
	if err := proc.FireTimers(context.Background()); err != nil {
		fmt.Println(err)
	}
	tt.Catchup()
	for k, v, ok := out.Next(); ok; k, v, ok = out.Next() {
		o := v.(*testpb.Occupancy)
		fmt.Printf("%s: %d ENTERs in the hour ending %s\n", k, o.GetEntersTotal(), time.UnixMilli(o.GetLastChangeMs()).UTC().Format("15:04"))
	}
	enter("f", "depot", 59*time.Minute) // that hour is final now
	// Output:
	// depot: 3 ENTERs in the hour ending 09:00
	// late: f
}
