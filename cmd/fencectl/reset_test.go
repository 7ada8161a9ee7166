package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/devicestats"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology/cluster"
)

// runDebouncer runs the debouncer with one fence requiring minSamples until
// the triggers topic holds want records, then stops it. While it runs, check
// is called once (the group has an active member).
func runDebouncer(t *testing.T, addr, stateDir string, minSamples uint32, want int64, check func()) {
	t.Helper()
	f, err := fences.NewCircleFence("depot", "Depot", 52, 13, 200, fences.Settings{MinSamples: minSamples, MinDwell: time.Millisecond, Detector: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	cat := fences.New()
	if err := cat.Apply(1, []fences.Fence{f}, nil); err != nil {
		t.Fatal(err)
	}
	d, err := debounce.New(geofence.Topology(), cat, debounce.Defaults(debounce.DefaultSettings()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	proc, err := d.Group().Processor(ctx, cluster.Config{Brokers: strings.Split(addr, ",")}, group.StateDir(stateDir))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for records(t, addr, geofence.TopicTriggers) < want {
		if time.Now().After(deadline) {
			t.Fatalf("debouncer (min_samples %d): %d triggers, want %d", minSamples, records(t, addr, geofence.TopicTriggers), want)
		}
		select {
		case err := <-done:
			t.Fatalf("debouncer stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if check != nil {
		check()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("debouncer: %v", err)
	}
}

// triggers reads the triggers topic: the ENTERs' event times, in order.
func enterTimes(t *testing.T, addr string, n int) []int64 {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(geofence.TopicTriggers), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []int64
	codec := codecs.For[geofencepb.Trigger]()
	for len(out) < n {
		f := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d ENTERs, want %d", len(out), n)
		}
		f.EachRecord(func(r *kgo.Record) {
			tr, err := codec.Unmarshal(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if tr.GetType() == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
				out = append(out, tr.GetEventTimeMs())
			}
		})
	}
	return out
}

// TestResetReprocessesUnderNewSettings: a device enters the depot; with
// min_samples 2 the debouncer confirms on the second inside ping. The fence
// changes to min_samples 5; reset refuses while the debouncer runs, then
// (stopped) resets the debouncer and occupancy's two groups (emptying
// occupancy-changes); the reprocessing confirms on the fifth inside ping.
func TestResetReprocessesUnderNewSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	addr := withTopology(t, int(geofence.Topology().KeyedPartitions))
	kc, _ := admin(t, addr)
	codec := codecs.For[geofencepb.Ping]()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	var recs []*kgo.Record
	for i := range 10 {
		lat := 52.0
		if i < 2 {
			lat = 52.1 // outside
		}
		v, err := codec.Marshal(&geofencepb.Ping{DeviceId: "car-1", Lat: lat, Lon: 13, AccuracyM: 5, DeviceTimeMs: t0 + int64(i)*10_000})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: geofence.TopicPings, Key: []byte("car-1"), Value: v})
	}
	if err := kc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	reset := []string{"reset", "--group", geofence.GroupDebouncer, "--group", geofence.GroupOccupancyMembers, "--group", geofence.GroupOccupancy,
		"--to-earliest", "--state-dir", stateDir, "--brokers", addr}

	runDebouncer(t, addr, stateDir, 2, 1, func() {
		code, out, errs := fencectl(t, reset...)
		wantCode(t, code, exitFailure, out, errs)
		wantContains(t, errs, "active member", geofence.GroupDebouncer)
	})
	if got := enterTimes(t, addr, 1); got[0] != t0+3*10_000 {
		t.Fatalf("ENTER at %d, want the second inside ping %d", got[0], t0+3*10_000)
	}
	before := records(t, addr, geofence.TopicTriggers)

	// Refused: a --state-dir that is not a group's state; nothing changes.
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, geofence.GroupDebouncer), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, geofence.GroupDebouncer, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := fencectl(t, "reset", "--group", geofence.GroupDebouncer, "--to-earliest", "--state-dir", other, "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, "not a group's state directory")
	if _, err := os.Stat(filepath.Join(other, geofence.GroupDebouncer, "precious")); err != nil {
		t.Fatal("a refused reset deleted files")
	}
	code, out, errs = fencectl(t, "reset", "--group", "nope", "--to-earliest", "--brokers", addr)
	wantCode(t, code, exitUsage, out, errs)
	// occupancy drops a change by its source offset: one of the two groups
	// alone is refused.
	for _, g := range []string{geofence.GroupOccupancyMembers, geofence.GroupOccupancy} {
		code, out, errs = fencectl(t, "reset", "--group", g, "--to-earliest", "--brokers", addr)
		wantCode(t, code, exitUsage, out, errs)
		wantContains(t, errs, "reset both", geofence.TopicOccupancyChanges)
	}

	// A change from before the reset: it must not be added up again.
	if err := kc.ProduceSync(context.Background(), &kgo.Record{Topic: geofence.TopicOccupancyChanges, Key: []byte("depot"), Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, errs = fencectl(t, reset...)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "commit pings/", "delete debouncer-table/", "remove state directory",
		"commit fence-triggers/", "delete occupancy-members-table/", "delete occupancy-table/", "delete occupancy-changes/", "commit occupancy-changes/")
	for _, g := range []string{geofence.GroupDebouncer, geofence.GroupOccupancyMembers, geofence.GroupOccupancy} {
		if _, err := os.Stat(filepath.Join(stateDir, g)); !os.IsNotExist(err) {
			t.Fatalf("state directory of %s still there: %v", g, err)
		}
	}
	_, adm := admin(t, addr)
	starts, err := adm.ListStartOffsets(context.Background(), geofence.TopicOccupancyChanges)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(context.Background(), geofence.GroupOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	members, err := adm.FetchOffsets(context.Background(), geofence.GroupOccupancyMembers)
	if err != nil {
		t.Fatal(err)
	}
	var changes int64
	starts.Each(func(o kadm.ListedOffset) {
		changes += o.Offset
		if c, ok := committed.Lookup(o.Topic, o.Partition); !ok || c.At != o.Offset {
			t.Errorf("occupancy's commit on %s/%d: %+v, want the emptied topic's end %d", o.Topic, o.Partition, c, o.Offset)
		}
	})
	if changes != records(t, addr, geofence.TopicOccupancyChanges) || changes == 0 {
		t.Errorf("%s not emptied: start offsets sum to %d, end offsets to %d", geofence.TopicOccupancyChanges, changes, records(t, addr, geofence.TopicOccupancyChanges))
	}
	if c, ok := members.Lookup(geofence.TopicTriggers, 0); !ok || c.At != 0 {
		t.Errorf("occupancy-members' commit on %s/0: %+v, want its earliest 0", geofence.TopicTriggers, c)
	}
	if _, ok := committed.Lookup(geofence.TopicTriggers, 0); ok {
		t.Errorf("occupancy was given a commit on %s, which it does not read", geofence.TopicTriggers)
	}

	// Reprocessing under min_samples 5: one more ENTER, on the fifth inside ping.
	runDebouncer(t, addr, stateDir, 5, before+1, nil)
	got := enterTimes(t, addr, 2)
	if got[1] != t0+6*10_000 {
		t.Fatalf("ENTER after the reset at %d, want the fifth inside ping %d", got[1], t0+6*10_000)
	}
}

// TestPairedEdges: of the stock topology's boundaries, only
// occupancy-changes, delivery-outcomes, visits-by-fence and
// device-hours-by-hour are written by one group for another to stream (each
// once, though delivery writes its outcomes from its triggers and its
// timers, and visit-rekey its re-keys from two topics); the visits' and
// device stats' outputs are not, so reset never deletes them.
func TestPairedEdges(t *testing.T) {
	topo, err := modules.Topology(24)
	if err != nil {
		t.Fatal(err)
	}
	got := pairedEdges(topo)
	want := []pairedEdge{{topic: geofence.TopicOccupancyChanges, writer: geofence.GroupOccupancyMembers, reader: geofence.GroupOccupancy},
		{topic: geofence.TopicVisitsByFence, writer: geofence.GroupVisitRekey, reader: geofence.GroupVisitStats},
		{topic: devicestats.TopicByHour, writer: devicestats.Rekey, reader: devicestats.Fleet},
		{topic: delivery.TopicOutcomes, writer: delivery.Group, reader: delivery.Status}}
	if !slices.Equal(got, want) {
		t.Fatalf("pairedEdges = %+v, want %+v", got, want)
	}
}
