package debounce_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// envelopeParts splits one encoded table value into what the application
// stores and what the kit adds.
type envelopeParts struct{ total, state, cursors, outputs, timers int }

func splitEnvelope(t *testing.T, raw []byte) envelopeParts {
	t.Helper()
	if len(raw) < 2 || raw[0] != 0 || raw[1] != 1 {
		t.Fatalf("table value is not an envelope: % x", raw[:min(len(raw), 8)])
	}
	env := &kitpb.Envelope{}
	if err := protov2.Unmarshal(raw[2:], env); err != nil {
		t.Fatal(err)
	}
	p := envelopeParts{total: len(raw)}
	p.state = protov2.Size(&kitpb.Envelope{State: env.GetState(), HasState: env.GetHasState()})
	for _, c := range env.GetCursors() {
		bare := protov2.Clone(c).(*kitpb.Cursor)
		bare.Sent = nil
		p.cursors += protov2.Size(&kitpb.Envelope{Cursors: []*kitpb.Cursor{bare}})
		p.outputs += protov2.Size(&kitpb.Envelope{Cursors: []*kitpb.Cursor{c}}) - protov2.Size(&kitpb.Envelope{Cursors: []*kitpb.Cursor{bare}})
	}
	for _, s := range env.GetSent() {
		p.outputs += protov2.Size(&kitpb.Envelope{Sent: []*kitpb.Sent{s}})
	}
	for _, tm := range env.GetTimers() {
		p.timers += protov2.Size(&kitpb.Envelope{Timers: []*kitpb.Timer{tm}})
	}
	return p
}

type sizeStats struct {
	n                 int
	sum               envelopeParts
	totals, overheads []int
}

func (s *sizeStats) add(p envelopeParts) {
	s.n++
	s.sum.total += p.total
	s.sum.state += p.state
	s.sum.cursors += p.cursors
	s.sum.outputs += p.outputs
	s.sum.timers += p.timers
	s.totals = append(s.totals, p.total)
	// The kit's overhead: everything but the application's state and the
	// timers it asked for (which it would store anyway).
	s.overheads = append(s.overheads, p.total-p.state-p.timers)
}

func p99(v []int) int {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)*99)/100]
}

func (s *sizeStats) report(t *testing.T, what string) (meanShare, p99Share float64) {
	t.Helper()
	n := float64(s.n)
	mean := func(x int) float64 { return float64(x) / n }
	meanShare = mean(s.sum.total-s.sum.state-s.sum.timers) / mean(s.sum.total)
	p99Share = float64(p99(s.overheads)) / float64(p99(s.totals))
	t.Logf("%s: %d values; mean %.0f B = state %.0f + cursors %.0f + outputs %.0f + timers %.0f + framing %.0f; kit overhead mean %.0f B (%.0f%%), p99 envelope %d B, p99 overhead %d B (%.0f%%), max envelope %d B, max overhead %d B",
		what, s.n, mean(s.sum.total), mean(s.sum.state), mean(s.sum.cursors), mean(s.sum.outputs), mean(s.sum.timers),
		mean(s.sum.total-s.sum.state-s.sum.cursors-s.sum.outputs-s.sum.timers),
		mean(s.sum.total-s.sum.state-s.sum.timers), 100*meanShare, p99(s.totals), p99(s.overheads), 100*p99Share, slices.Max(s.totals), slices.Max(s.overheads))
	return meanShare, p99Share
}

// TestEnvelopeBytes runs a seeded fleet's pings (one a second per device, over
// the demo fences) through the real debouncer under Goka's tester, with offset
// commits as sarama makes them (every second, learnt by the kit a poll later),
// and measures the debouncer's table values split by part: every write (what
// the changelog carries) and the table at the end (what the store holds, each
// device with a pending silence timer).
func TestEnvelopeBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	cat := fences.New()
	if err := cat.Apply(1, fences.Demo(), nil); err != nil {
		t.Fatal(err)
	}
	sim, err := fleet.New(fleet.Config{Seed: 7, Moving: 60, Parked: 40, ParkedOffsetM: 5, NoiseSigmaM: 5,
		Interval: time.Second, Duration: 8 * time.Minute}, cat.Snapshot().All())
	if err != nil {
		t.Fatal(err)
	}
	pings := sim.Pings()
	now := time.UnixMilli(pings[0].GetDeviceTimeMs())
	tt := tester.New(t)
	d, err := debounce.New(geofence.Topology(), cat, debounce.Now(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	commits := newCommitEmulation(tt, &now, geofence.TopicPings, geofence.TopicDebouncerTimers)
	proc, err := d.Group().Processor(context.Background(), cluster.Config{}, append(d.ProcessorOpts(), append(commits.opts(), group.Tester(tt))...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	}()
	writes := tt.NewQueueTracker(geofence.TopicDebouncer)
	var perWrite sizeStats
	lastLook := now
	for _, p := range pings {
		now = time.UnixMilli(p.GetDeviceTimeMs())
		commits.tick()
		tt.Consume(geofence.TopicPings, p.GetDeviceId(), p)
		if now.Sub(lastLook) >= time.Second {
			lastLook = now
			if err := proc.FireTimers(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for {
			_, raw, ok := writes.NextRaw()
			if !ok {
				break
			}
			if raw != nil {
				perWrite.add(splitEnvelope(t, raw))
			}
		}
	}
	var atRest sizeStats
	for _, dev := range sim.Devices() {
		v := tt.TableValue(goka.Table(geofence.TopicDebouncer), dev)
		env, ok := v.(*kitpb.Envelope)
		if !ok {
			t.Fatalf("%s: table value %T", dev, v)
		}
		raw, err := (&protov2.MarshalOptions{Deterministic: true}).Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		atRest.add(splitEnvelope(t, append([]byte{0, 1}, raw...)))
	}
	perWrite.report(t, "every write")
	meanShare, p99Share := atRest.report(t, "table at the end")
	if meanShare > 0.5 || p99Share > 0.5 {
		t.Errorf("kit overhead of the table's envelopes: mean %.0f%%, p99 %.0f%%; want at most 50%%", 100*meanShare, 100*p99Share)
	}
}
