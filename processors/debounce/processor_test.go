package debounce_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// A 1 km circle at (52.5, 13.4): points 0.0045° of latitude (~500 m) north of
// the centre are inside, 0.0135° (~1.5 km) are outside.
const (
	centerLat, centerLon = 52.5, 13.4
	insideLat            = centerLat + 0.0045
	outsideLat           = centerLat + 0.0135
)

func testCatalogue(t *testing.T) *fences.Catalogue { return testCatalogueTB(t) }

func testCatalogueTB(t interface {
	Helper()
	Fatal(...any)
}) *fences.Catalogue {
	t.Helper()
	f, err := fences.NewCircleFence("zone-1", "Zone 1", centerLat, centerLon, 1000, fences.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	cat := fences.New()
	if err := cat.Apply(7, []fences.Fence{f}, nil); err != nil {
		t.Fatal(err)
	}
	return cat
}

func testSettings() debounce.Settings {
	s := debounce.DefaultSettings()
	s.MinSamples = 3
	s.MinDwell = 2 * time.Second
	s.Hysteresis = 10
	s.Loiter = time.Minute
	s.SilenceTimeout = 5 * time.Minute
	return s
}

type harness struct {
	t     *testing.T
	tt    *tester.Tester
	d     *debounce.Debouncer
	proc  *group.Processor
	trigs *tester.QueueTracker
	dlq   *tester.QueueTracker
	now   time.Time
	hlc   uint64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, tt: tester.New(t), now: time.UnixMilli(1_800_000_000_000)}
	d, err := debounce.New(topology.Geofence(), testCatalogue(t), debounce.WithDefaults(testSettings()),
		debounce.WithClock(func() time.Time { return h.now }))
	if err != nil {
		t.Fatal(err)
	}
	proc, err := d.Group().Processor(context.Background(), cluster.Config{}, group.Tester(h.tt))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	})
	h.d, h.proc = d, proc
	h.trigs = h.tt.NewQueueTracker(topology.TopicTriggers)
	h.dlq = h.tt.NewQueueTracker(topology.TopicDeadLetter)
	return h
}

// ping sends a ping of device at event time tMs (ms after the base) with the next HLC.
func (h *harness) ping(device string, lat float64, tMs int64) {
	h.hlc += 10
	h.pingHLC(device, lat, tMs, h.hlc)
}

func (h *harness) pingHLC(device string, lat float64, tMs int64, hlcv uint64) {
	h.tt.Consume(topology.TopicPings, device, &geofencepb.Ping{
		DeviceId: device, Lat: lat, Lon: centerLon, AccuracyM: 3,
		DeviceTimeMs: 1_800_000_000_000 + tMs, Hlc: hlcv,
	})
}

func (h *harness) nextTriggers() []*geofencepb.Trigger {
	var out []*geofencepb.Trigger
	for {
		key, v, ok := h.trigs.Next()
		if !ok {
			return out
		}
		tr := v.(*geofencepb.Trigger)
		if key != tr.DeviceId {
			h.t.Fatalf("trigger keyed %q but device %q: the trigger topic must stay keyed by device", key, tr.DeviceId)
		}
		out = append(out, tr)
	}
}

func (h *harness) state(device string) *geofencepb.DeviceState {
	v := h.tt.TableValue(topology.TopicDebouncer, device)
	st, _, ok := codecs.As[geofencepb.DeviceState](v)
	if !ok {
		return nil
	}
	return st
}

func TestProcessorEmitsDebouncedEnterAndExit(t *testing.T) {
	h := newHarness(t)
	h.ping("veh-1", outsideLat, 0)
	h.ping("veh-1", insideLat, 1000)
	h.ping("veh-1", insideLat, 2000)
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("ENTER after 2 samples / 1 s, want none before 3 samples over 2 s: %v", got)
	}
	h.ping("veh-1", insideLat, 3000)
	got := h.nextTriggers()
	if len(got) != 1 || got[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
		t.Fatalf("want one ENTER, got %v", got)
	}
	enter := got[0]
	if enter.FenceId != "zone-1" || enter.CatalogueVersion != 7 || enter.EventTimeMs != 1_800_000_003_000 {
		t.Fatalf("ENTER fields: %v", enter)
	}
	if want := debounce.TriggerID("veh-1", "zone-1", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, enter.Hlc); enter.TriggerId != want {
		t.Fatalf("trigger id %q, want %q", enter.TriggerId, want)
	}
	st := h.state("veh-1")
	if st == nil || debounce.FenceStateOf(st, "zone-1").GetPhase() != geofencepb.Phase_PHASE_INSIDE || st.Pings != 4 || st.LastHlc != h.hlc {
		t.Fatalf("state after ENTER: %v", st)
	}
	// One outside sample among inside ones is a flap, not an exit.
	h.ping("veh-1", outsideLat, 4000)
	h.ping("veh-1", insideLat, 5000)
	for i := int64(0); i < 3; i++ {
		h.ping("veh-1", outsideLat, 6000+i*1000)
	}
	got = h.nextTriggers()
	if len(got) != 1 || got[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_EXIT || got[0].Reason != geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED {
		t.Fatalf("want one confirmed EXIT, got %v", got)
	}
	if st := h.state("veh-1"); len(st.FenceStates) != 0 {
		t.Fatalf("settled OUTSIDE must leave no per-fence state, got %v", st.FenceStates)
	}
}

func TestProcessorDropsStalePingsByHLC(t *testing.T) {
	h := newHarness(t)
	h.pingHLC("veh-2", outsideLat, 0, 100)
	h.pingHLC("veh-2", insideLat, 1000, 90)  // decrease
	h.pingHLC("veh-2", insideLat, 1000, 100) // duplicate
	st := h.state("veh-2")
	if st.Pings != 1 || st.StalePings != 2 || st.LastHlc != 100 {
		t.Fatalf("stale pings must not be applied: pings=%d stale=%d last_hlc=%d", st.Pings, st.StalePings, st.LastHlc)
	}
	if len(st.FenceStates) != 0 {
		t.Fatalf("stale inside ping started a candidate: %v", st.FenceStates)
	}
}

func TestProcessorDeadLettersInvalidPingsAndContinues(t *testing.T) {
	h := newHarness(t)
	bad := []*geofencepb.Ping{
		{DeviceId: "veh-3", Lat: math.NaN(), Lon: centerLon, DeviceTimeMs: 1, Hlc: 1},
		{DeviceId: "veh-3", Lat: 91, Lon: centerLon, DeviceTimeMs: 1, Hlc: 2},
		{DeviceId: "veh-3", Lat: insideLat, Lon: math.Inf(1), DeviceTimeMs: 1, Hlc: 3},
		{DeviceId: "other", Lat: insideLat, Lon: centerLon, DeviceTimeMs: 1, Hlc: 4},
		{DeviceId: "veh-3", Lat: insideLat, Lon: centerLon, DeviceTimeMs: 1, Hlc: 0},
	}
	for _, p := range bad {
		h.tt.Consume(topology.TopicPings, "veh-3", p)
	}
	h.tt.Consume(topology.TopicPings, "", &geofencepb.Ping{Lat: insideLat, Lon: centerLon, DeviceTimeMs: 1, Hlc: 9})
	var reasons []string
	for {
		hdr, key, _, ok := h.dlq.NextWithHeaders()
		if !ok {
			break
		}
		reasons = append(reasons, string(hdr[group.HeaderReason]))
		if string(hdr[group.HeaderSourceTopic]) != topology.TopicPings {
			t.Fatalf("dead letter source topic %q", hdr[group.HeaderSourceTopic])
		}
		_ = key
	}
	want := []string{"invalid", "invalid", "invalid", "invalid", "invalid", "bad-key"}
	if len(reasons) != len(want) {
		t.Fatalf("dead letters %v, want %v", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Fatalf("dead letter %d reason %q, want %q", i, reasons[i], want[i])
		}
	}
	// Processing continues: a valid ping after the poison is applied.
	h.ping("veh-3", insideLat, 0)
	if st := h.state("veh-3"); st == nil || st.Pings != 1 {
		t.Fatalf("valid ping after poison not applied: %v", st)
	}
}

func TestSilenceSweepClosesInsideDeviceWithTimeout(t *testing.T) {
	h := newHarness(t)
	for i := int64(0); i < 4; i++ {
		h.ping("veh-4", insideLat, i*1000)
	}
	if got := h.nextTriggers(); len(got) != 1 {
		t.Fatalf("want ENTER, got %v", got)
	}
	lastHLC := h.state("veh-4").LastHlc
	// Wall clock 4 minutes after the last ping: not yet silent long enough.
	h.now = time.UnixMilli(1_800_000_003_000).Add(4 * time.Minute)
	if err := h.d.Sweep(context.Background(), h.proc); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("early timeout: %v", got)
	}
	h.now = time.UnixMilli(1_800_000_003_000).Add(6 * time.Minute)
	if err := h.d.Sweep(context.Background(), h.proc); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	got := h.nextTriggers()
	if len(got) != 1 || got[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_EXIT || got[0].Reason != geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT {
		t.Fatalf("want EXIT/TIMEOUT, got %v", got)
	}
	if got[0].Hlc <= lastHLC {
		t.Fatalf("timeout exit HLC %d must order after the device's last %d", got[0].Hlc, lastHLC)
	}
	// A second sweep finds nothing more to close.
	if err := h.d.Sweep(context.Background(), h.proc); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("second sweep emitted %v", got)
	}
}
