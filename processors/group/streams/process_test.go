package streams_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// processTopology adds the overstay process's topics to the operator
// tests': events are "ENTER 08:05" or "EXIT 08:20" (event time on t0's
// day), the state is when the key entered.
func processTopology(timers bool) *topology.Topology {
	topo := opsTopology()
	const s = "google.protobuf.StringValue"
	topo.Topics = append(topo.Topics,
		topology.Topic{Name: "events", Key: "id", Value: s, Partitions: 4, Cleanup: topology.CleanupDelete},
		topology.Topic{Name: "alerts", Key: "id", Value: s, Partitions: 4, Cleanup: topology.CleanupDelete},
		topology.Topic{Name: "overstay-table", Key: "id", Value: "google.protobuf.Timestamp", Partitions: 4, Cleanup: topology.CleanupCompact},
	)
	if timers {
		topo.Topics = append(topo.Topics, topology.TimersTopic("overstay", "id", 4))
	}
	return topo
}

type (
	stamp   = timestamppb.Timestamp
	stayCtx = group.Context[stamp, *stamp]
)

// event reads "ENTER 08:05": the kind and when, on t0's day.
func event(v *str) (kind string, at time.Time, err error) {
	kind, hm, _ := strings.Cut(v.GetValue(), " ")
	clock, err := time.Parse("15:04", hm)
	if err != nil || kind != "ENTER" && kind != "EXIT" {
		return "", time.Time{}, fmt.Errorf("event %q: want ENTER or EXIT and a time", v.GetValue())
	}
	return kind, time.Date(t0.Year(), t0.Month(), t0.Day(), clock.Hour(), clock.Minute(), 0, 0, time.UTC), nil
}

func eventTime(v *str) time.Time {
	_, at, _ := event(v)
	return at
}

// overstay arms a stream-time timer limit after an ENTER; the EXIT cancels
// it; the timer, when stream time reaches it, forwards an alert.
func overstay(limit time.Duration) func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *str) error {
	return func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *str) error {
		group.OnTimer(p.Group(), func(c *stayCtx, t group.Timer) error {
			entered := c.State().AsTime()
			c.DeleteState()
			return p.Forward(c, c.Key(), wrapperspb.String(fmt.Sprintf("in since %s, still in at %s", entered.Format("15:04"), t.At.UTC().Format("15:04"))))
		})
		return func(c *stayCtx, v *str) error {
			kind, at, err := event(v)
			if err != nil {
				return err
			}
			if kind == "EXIT" {
				c.CancelTimer("overstay")
				c.DeleteState()
				return nil
			}
			c.SetState(timestamppb.New(at))
			return c.SetTimer("overstay", at.Add(limit), group.StreamClock)
		}
	}
}

func overstayApp(t *testing.T) *streamstest.Driver {
	t.Helper()
	b := streams.New(processTopology(true), "ops", nil)
	b.Stream[str]("events", streams.EventTime(eventTime)).
		Process("overstay", overstay(30*time.Minute)).
		MapValues(func(v *str) *str { return wrapperspb.String("overstay: " + v.GetValue()) }).
		To("alerts")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if gs := app.Groups(); len(gs) != 1 || gs[0].Name() != "overstay" {
		t.Fatalf("groups %v, want only the process's (no routing group)", gs)
	}
	return streamstest.New(t, app, t0.Add(24*time.Hour))
}

func pipeEvents(d *streamstest.Driver, kvs ...string) {
	in := streamstest.InputTopic[str](d, "events")
	for i := 0; i < len(kvs); i += 2 {
		in.Pipe(kvs[i], wrapperspb.String(kvs[i+1]))
	}
}

// An ENTER arms a stream-time timer, an EXIT cancels it, and only a timer
// stream time reaches fires: its alert goes through the operators after
// the Process, in its group; the state is S itself in the group's table.
func TestProcessOverstayTimer(t *testing.T) {
	d := overstayApp(t)
	pipeEvents(d, "car-1", "ENTER 08:00", "car-2", "ENTER 08:05", "car-1", "EXIT 08:10", "car-3", "ENTER 08:20")
	if st := grouptest.State[stamp](d.Harness(), "overstay-table", "car-2"); st == nil || !st.AsTime().Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("car-2's state %v, want its ENTER at 08:05", st)
	}
	if st := grouptest.State[stamp](d.Harness(), "overstay-table", "car-1"); st != nil {
		t.Fatalf("car-1's state %v after its EXIT, want none", st)
	}
	d.FireTimers() // stream time 08:20: nothing is due
	if got := read(t, d, "alerts"); len(got) != 0 {
		t.Fatalf("alerts before any timer was due: %v", got)
	}
	pipeEvents(d, "car-4", "ENTER 08:40") // stream time 08:40: car-2's 08:35 is due, car-1's was cancelled
	d.FireTimers()
	if got := strings.Join(read(t, d, "alerts"), ","); got != "car-2=overstay: in since 08:05, still in at 08:35" {
		t.Fatalf("alerts %q, want car-2's only", got)
	}
	pipeEvents(d, "car-3", "EXIT 08:45", "car-4", "ENTER 09:30") // car-4 re-enters: its timer moves to 10:00
	d.FireTimers()
	if got := read(t, d, "alerts"); len(got) != 0 {
		t.Fatalf("alerts %v: car-3 left in time and car-4's timer moved", got)
	}
	if st := grouptest.State[stamp](d.Harness(), "overstay-table", "car-2"); st != nil {
		t.Fatalf("car-2's state %v after its alert, want none", st)
	}
}

// An error from the handler dead-letters the record as invalid, as the kit
// does, and the process carries on.
func TestProcessHandlerErrorDeadLetters(t *testing.T) {
	d := overstayApp(t)
	pipeEvents(d, "car-1", "LEAVE 08:00", "car-2", "ENTER 08:00", "car-3", "ENTER 09:00")
	dls := d.DeadLetters()
	if len(dls) != 1 || dls[0].Key != "car-1" || dls[0].Reason != deadletter.ReasonInvalid {
		t.Fatalf("dead letters %+v, want car-1's as %s", dls, deadletter.ReasonInvalid)
	}
	d.FireTimers()
	if got := strings.Join(read(t, d, "alerts"), ","); got != "car-2=overstay: in since 08:00, still in at 08:30" {
		t.Fatalf("alerts %q", got)
	}
}

// Describe shows the process's group: its source, the process and what runs
// on what it forwards.
func TestProcessDescribe(t *testing.T) {
	b := streams.New(processTopology(true), "ops", nil)
	b.Stream[str]("events").Process("overstay", overstay(time.Minute)).To("alerts")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := `App ops (topology ops)
  Group overstay: reads events; writes alerts; table overstay-table
    Source events (key id, google.protobuf.StringValue)
      --> process overstay -> table overstay-table
    Forwarded by process overstay (google.protobuf.StringValue; its state google.protobuf.Timestamp in overstay-table)
      --> write alerts
`
	if got := app.Describe(); got != want {
		t.Fatalf("Describe:\n%s\nwant:\n%s", got, want)
	}
	if m := app.Mermaid(); !strings.Contains(m, "n1_overstay --> n3_overstay") {
		t.Fatalf("Mermaid has no edge from the process to the write after it:\n%s", m)
	}
}

// What a Process's group cannot do is refused when the app is built, with
// the reason.
func TestProcessRefused(t *testing.T) {
	noop := func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *str) error {
		return func(*stayCtx, *str) error { return nil }
	}
	for _, tc := range []struct {
		name   string
		timers bool
		define func(b *streams.Builder)
		want   []string
	}{
		{"timers without a timer topic", false, func(b *streams.Builder) {
			b.Stream[str]("events").Process("overstay", overstay(time.Minute))
		}, []string{"overstay", "timer"}},
		{"a key change before it", true, func(b *streams.Builder) {
			b.Stream[str]("events").Map(func(k string, v *str) (string, *str) { return v.GetValue(), v }).Process("overstay", noop)
		}, []string{"process overstay", "SelectKey"}},
		{"another type than its source's", true, func(b *streams.Builder) {
			b.Stream[str]("events").MapValues(func(v *str) *num { return wrapperspb.Int64(1) }).
				Process("overstay", func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *num) error {
					return func(*stayCtx, *num) error { return nil }
				})
		}, []string{"process overstay takes google.protobuf.Int64Value", "events holds google.protobuf.StringValue"}},
		{"what another process forwards", true, func(b *streams.Builder) {
			b.Stream[str]("in").Process("agg", func(p *streams.Processing[num, *num, str]) func(c *group.Context[num, *num], v *str) error {
				return func(*group.Context[num, *num], *str) error { return nil }
			}).Process("overstay", noop)
		}, []string{"process overstay reads what process agg forwards"}},
		{"a state its table does not hold", true, func(b *streams.Builder) {
			b.Stream[str]("events").Process("agg", func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *str) error {
				return func(*stayCtx, *str) error { return nil }
			})
		}, []string{"agg-table", "holds google.protobuf.Int64Value, not google.protobuf.Timestamp"}},
		{"no handler", true, func(b *streams.Builder) {
			b.Stream[str]("events").Process("overstay", func(*streams.Processing[stamp, *stamp, str]) func(*stayCtx, *str) error { return nil })
		}, []string{"setup returned no handler"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.New(processTopology(tc.timers), "ops", nil)
			tc.define(b)
			_, err := b.Build()
			if err == nil {
				t.Fatal("built")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Process: a handler with state and timers. An ENTER sets the key's state
// and arms a stream-time timer 30 minutes on; an EXIT cancels it; a timer
// that stream time reaches forwards an alert to the operators after the
// Process, which run in its group.
func Example_process() {
	b := streams.New(processTopology(true), "ops", nil)
	b.Stream[str]("events", streams.EventTime(eventTime)).
		Process("overstay", func(p *streams.Processing[stamp, *stamp, str]) func(c *stayCtx, v *str) error {
			group.OnTimer(p.Group(), func(c *stayCtx, t group.Timer) error {
				alert := fmt.Sprintf("in since %s, still in at %s", c.State().AsTime().Format("15:04"), t.At.UTC().Format("15:04"))
				return p.Forward(c, c.Key(), wrapperspb.String(alert))
			})
			return func(c *stayCtx, v *str) error {
				kind, at, err := event(v)
				switch {
				case err != nil:
					return err // dead-lettered as invalid
				case kind == "EXIT":
					c.CancelTimer("overstay")
					c.DeleteState()
					return nil
				}
				c.SetState(timestamppb.New(at))
				return c.SetTimer("overstay", at.Add(30*time.Minute), group.StreamClock)
			}
		}).
		To("alerts")
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	in := streamstest.InputTopic[str](d, "events")
	in.Pipe("car-1", wrapperspb.String("ENTER 08:00"))
	in.Pipe("car-2", wrapperspb.String("ENTER 08:05"))
	in.Pipe("car-1", wrapperspb.String("EXIT 08:10"))
	in.Pipe("car-3", wrapperspb.String("ENTER 08:40")) // stream time 08:40
	d.FireTimers()
	for _, r := range streamstest.OutputTopic[str](d, "alerts").Read() {
		fmt.Println(r.Key, r.Value.GetValue())
	}
	// Output:
	// car-2 in since 08:05, still in at 08:35
}

// A re-key that names no boundary crosses the topology's: Describe and
// Mermaid show that one (as processors/visits' re-keys do).
func TestDescribeDeclaredBoundary(t *testing.T) {
	topo := opsTopology()
	topo.Boundaries = append(topo.Boundaries, topology.Boundary{Processor: "ops", From: "in", To: "by-len",
		Preserved: "one id's values", Lost: "order between ids"})
	b := streams.New(topo, "ops", nil)
	b.Stream[str]("in").SelectKey(topology.Boundary{}, "by-len", func(_ string, v *str) string { return fmt.Sprint(len(v.GetValue())) })
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := app.Describe(); !strings.Contains(d, "in -> by-len (key id -> len), in group ops\n      keeps: one id's values\n      loses: order between ids") {
		t.Fatalf("Describe lacks the declared boundary:\n%s", d)
	}
	if m := app.Mermaid(); !strings.Contains(m, `re-key: keeps one id's values`) {
		t.Fatalf("Mermaid lacks the declared boundary:\n%s", m)
	}
}

// A join after a Process runs in the process's group: what a timer
// forwards is enriched with a table read for its key there.
func TestProcessThenJoin(t *testing.T) {
	b := streams.New(processTopology(true), "ops", nil)
	counts := b.Stream[str]("in").GroupByKey().Count("agg")
	b.Stream[str]("events", streams.EventTime(eventTime)).
		Process("overstay", overstay(30*time.Minute)).
		LeftJoin(counts, func(v *str, n *num) *str {
			return wrapperspb.String(fmt.Sprintf("%s (%d earlier visits)", v.GetValue(), n.GetValue()))
		}).
		To("alerts")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := streamstest.New(t, app, t0.Add(24*time.Hour))
	pipe(t, d, "in", "car-1", "a", "car-1", "b")
	pipeEvents(d, "car-1", "ENTER 08:00", "car-2", "ENTER 08:01", "car-3", "ENTER 08:45")
	d.FireTimers()
	got := read(t, d, "alerts")
	want := []string{"car-1=in since 08:00, still in at 08:30 (2 earlier visits)", "car-2=in since 08:01, still in at 08:31 (0 earlier visits)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("alerts %q, want %q", got, want)
	}
}
