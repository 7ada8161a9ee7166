package group_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// joinMember runs, against a broker, a left join of one stream with itself:
// a ping with Lat 1 is a right record, any other a left one, at its device
// time; each result is emitted as "L@t|R@t" ("-" for a missing side), and a
// late record as "late:key@t". One stream keeps the partition's order the
// order the test produces. Timer looks are an hour apart: none runs.
func startJoinMember(t *testing.T, cl cluster.Config, dir string) *indexedMember {
	t.Helper()
	type jctx = group.Context[kitpb.JoinBuffer, *kitpb.JoinBuffer]
	g := group.New[kitpb.JoinBuffer](tableOf(timerTopology(1), "fencestream.kit.v1.JoinBuffer"), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	j := windows.NewStreamJoin(g, "j", windows.JoinWindows(10*time.Millisecond, 5*time.Millisecond, windows.LeftJoin),
		func(jb *kitpb.JoinBuffer) *kitpb.JoinBuffer { return jb },
		func(c *jctx, _ *kitpb.JoinBuffer, l, r *testpb.Ping) error {
			out.Emit(c, c.Key(), &testpb.Trigger{FenceId: pairString(l, r)})
			return nil
		})
	group.Stream(g, topicIn, func(c *jctx, p *testpb.Ping) error {
		st := c.State()
		if st == nil {
			st = &kitpb.JoinBuffer{}
		}
		add := j.AddLeft
		if p.GetLat() == 1 {
			add = j.AddRight
		}
		err := add(c, st, c.EventTime(), p)
		if errors.Is(err, windows.ErrLate) {
			out.Emit(c, c.Key(), &testpb.Trigger{FenceId: fmt.Sprintf("late:%s@%d", c.Key(), p.GetDeviceTimeMs())})
		} else if err != nil {
			return err
		}
		c.SetState(st)
		return nil
	}, group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) }))
	ctx, cancel := context.WithCancel(context.Background())
	wall := &wallClock{at: time.UnixMilli(base)}
	p, err := g.Processor(ctx, cl, group.StateDir(dir), group.Clock(wall.now), group.TimerInterval(time.Hour))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m := &indexedMember{proc: p, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- p.Run(ctx) }()
	t.Cleanup(m.stop)
	return m
}

func pairString(l, r *testpb.Ping) string {
	ls, rs := "-", "-"
	if l != nil {
		ls = fmt.Sprint("L@", l.GetDeviceTimeMs())
	}
	if r != nil {
		rs = fmt.Sprint("R@", r.GetDeviceTimeMs())
	}
	return ls + "|" + rs
}

// The test for persisted stream time: a processor stopped and
// restarted mid-stream gives the outputs of an uninterrupted run. Key b's
// record moves the partition's stream time to 2000; after the restart a right
// record of key a at 1005 is late (its window closed at 1005+10+5), and the
// left record of a at 1000 is handed over unmatched. A stream time that
// starts unknown after the restart joined them instead.
func TestStreamTimeSurvivesARestart(t *testing.T) {
	type rec struct {
		key   string
		right bool
		at    int64
	}
	before := []rec{{"a", false, 1000}, {"b", false, 2000}}
	after := []rec{{"a", true, 1005}, {"c", false, 3000}, {"c", true, 3000}}
	const last = "L@3000|R@3000"

	run := func(t *testing.T, restart bool) []string {
		cl := embeddedtest.Cluster(t)
		if _, err := group.CheckBroker(context.Background(), cl, tableOf(timerTopology(1), "fencestream.kit.v1.JoinBuffer"), true); err != nil {
			t.Fatal(err)
		}
		prod := embeddedtest.Client(t, cl)
		dir := t.TempDir()
		m := startJoinMember(t, cl, dir)
		done := 0
		// One record at a time, each applied before the next is produced:
		// both runs see the same order.
		produce := func(rs []rec) {
			for _, r := range rs {
				lat := 0.0
				if r.right {
					lat = 1
				}
				v, _ := codecs.For[testpb.Ping]().Marshal(&testpb.Ping{DeviceId: r.key, DeviceTimeMs: r.at, Lat: lat})
				if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: topicIn, Key: []byte(r.key), Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				done++
				waitFor(t, fmt.Sprintf("record %d applied", done), time.Minute, func() bool { n, _ := m.proc.Processed(topicIn); return n >= done })
			}
		}
		produce(before)
		if restart {
			m.stop()
			m = startJoinMember(t, cl, dir)
			done = 0
		}
		produce(after)
		var got []string
		embeddedtest.ConsumeUntil(t, cl, topicOut, func(rs []*kgo.Record) bool {
			got = got[:0]
			for _, r := range rs {
				tr, err := codecs.For[testpb.Trigger]().Unmarshal(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(r.Key)+":"+tr.GetFenceId())
			}
			return slices.Contains(got, "c:"+last)
		})
		if n, _ := m.proc.Processed(topicIn); restart && n != len(after) {
			// A redelivered record would move stream time again by itself,
			// and the test would prove nothing.
			t.Fatalf("the restarted processor applied %d records, want the %d new ones (no redelivery)", n, len(after))
		}
		return got
	}
	want := run(t, false)
	if !slices.Equal(want, []string{"a:L@1000|-", "a:late:a@1005", "c:" + last}) {
		t.Fatalf("uninterrupted run: %q", want)
	}
	if got := run(t, true); !slices.Equal(got, want) {
		t.Fatalf("stopped and restarted mid-stream:\n %q\nuninterrupted:\n %q", got, want)
	}
}
