package debounce_test

import (
	"context"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/hlc"
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
	// The harness's pings jump 1 km in a second between inside and outside;
	// the speed check (TestImplausibleJumpIsNoEvidence) would ignore them.
	s.MaxSpeedMS = 0
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
	d, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.Defaults(testSettings()),
		debounce.Now(func() time.Time { return h.now }))
	if err != nil {
		t.Fatal(err)
	}
	proc, err := d.Group().Processor(context.Background(), cluster.Config{}, append(d.ProcessorOpts(), group.Tester(h.tt))...)
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
	h.trigs = h.tt.NewQueueTracker(geofence.TopicTriggers)
	h.dlq = h.tt.NewQueueTracker(topology.TopicDeadLetter)
	return h
}

// ping sends a ping of device at event time tMs (ms after the base) with the next HLC.
func (h *harness) ping(device string, lat float64, tMs int64) {
	h.hlc += 10
	h.pingHLC(device, lat, tMs, h.hlc)
}

func (h *harness) pingHLC(device string, lat float64, tMs int64, hlcv uint64) {
	h.tt.Consume(geofence.TopicPings, device, &geofencepb.Ping{
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
	st, err := group.StateOf[geofencepb.DeviceState](h.tt.TableValue(geofence.TopicDebouncer, device))
	if err != nil {
		h.t.Fatal(err)
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
	if want := geofence.TriggerID("veh-1", "zone-1", geofencepb.TriggerType_TRIGGER_TYPE_ENTER, enter.Hlc); enter.TriggerId != want {
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
	h.pingHLC("veh-2", insideLat, 1000, 90)  // decrease: dead-lettered as stale
	h.pingHLC("veh-2", insideLat, 1000, 100) // the same HLC, another ping: dead-lettered as duplicate-hlc
	h.pingHLC("veh-2", outsideLat, 0, 100)   // the first ping again, byte for byte: a replay, nothing new
	st := h.state("veh-2")
	if st.Pings != 1 || st.LastHlc != 100 {
		t.Fatalf("stale pings must not be applied: pings=%d last_hlc=%d", st.Pings, st.LastHlc)
	}
	if len(st.FenceStates) != 0 {
		t.Fatalf("stale inside ping started a candidate: %v", st.FenceStates)
	}
	if got := h.deadLetterReasons(); fmt.Sprint(got) != "[stale duplicate-hlc]" {
		t.Fatalf("dead letters %v, want [stale duplicate-hlc]: nothing disappears silently", got)
	}
}

// A device clock of one-second resolution and no HLC of its own: two pings in
// the same second get the same HLC (PingHLC). The second is not a replay — it
// is another position — so it is dead-lettered (duplicate-hlc), not dropped
// without a word.
func TestProcessorSameSecondPingsAreDuplicateHLC(t *testing.T) {
	h := newHarness(t)
	h.pingHLC("veh-5", outsideLat, 1000, 0)
	h.pingHLC("veh-5", insideLat, 1000, 0)
	if st := h.state("veh-5"); st.Pings != 1 {
		t.Fatalf("pings applied %d, want 1", st.Pings)
	}
	hdr, key, v, ok := h.dlq.NextWithHeaders()
	if !ok {
		t.Fatal("the second ping of the second disappeared: no dead letter")
	}
	var dl geofencepb.Ping
	if err := proto.Unmarshal(v.([]byte), &dl); err != nil {
		t.Fatal(err)
	}
	if r := string(hdr[deadletter.HeaderReason]); r != deadletter.ReasonDuplicateHLC || key != "veh-5" || dl.GetLat() != insideLat {
		t.Fatalf("dead letter %q %v reason %q, want the second ping as %s", key, &dl, r, deadletter.ReasonDuplicateHLC)
	}
	// The first ping produced again, byte for byte (hlc still 0): a replay.
	h.pingHLC("veh-5", outsideLat, 1000, 0)
	if got := h.deadLetterReasons(); len(got) != 0 {
		t.Fatalf("more dead letters: %v", got)
	}
	if st := h.state("veh-5"); st.Pings != 1 {
		t.Fatalf("pings applied %d, want 1", st.Pings)
	}
}

// A ping whose HLC is far in the future is dead-lettered and does not freeze
// the device: its later, normal pings are still applied.
func TestProcessorFutureHLCDoesNotFreezeDevice(t *testing.T) {
	h := newHarness(t)
	h.pingHLC("veh-9", outsideLat, 0, hlc.Pack(h.now.UnixMilli(), 0))
	for _, future := range []uint64{hlc.Pack(h.now.Add(10*365*24*time.Hour).UnixMilli(), 0), math.MaxUint64} {
		h.pingHLC("veh-9", insideLat, 1000, future)
	}
	if got := h.deadLetterReasons(); fmt.Sprint(got) != "[future-hlc future-hlc]" {
		t.Fatalf("dead letters %v, want two future-hlc", got)
	}
	for i := int64(1); i <= 4; i++ {
		h.pingHLC("veh-9", insideLat, i*1000, hlc.Pack(h.now.UnixMilli()+i*1000, 0))
	}
	st := h.state("veh-9")
	if st.Pings != 5 || hlc.Wall(st.LastHlc) != h.now.UnixMilli()+4000 {
		t.Fatalf("device frozen by a future HLC: pings=%d last_hlc wall=%d", st.Pings, hlc.Wall(st.LastHlc))
	}
	if got := h.nextTriggers(); len(got) != 1 || got[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
		t.Fatalf("want the ENTER of the normal pings, got %v", got)
	}
}

// A producer that sets no HLC (Java, Python, kcat) gets one derived from the
// device time, and its pings order by it.
func TestProcessorDerivesHLCFromDeviceTime(t *testing.T) {
	h := newHarness(t)
	for i := int64(0); i < 4; i++ {
		h.pingHLC("veh-8", insideLat, i*1000, 0)
	}
	got := h.nextTriggers()
	if len(got) != 1 || got[0].Hlc != hlc.Pack(1_800_000_000_000+2000, 0) {
		t.Fatalf("want an ENTER carrying the derived HLC of its confirming ping, got %v", got)
	}
	h.pingHLC("veh-8", insideLat, 500, 0) // older device time: stale
	if r := h.deadLetterReasons(); fmt.Sprint(r) != "[stale]" {
		t.Fatalf("dead letters %v, want [stale]", r)
	}
	if st := h.state("veh-8"); st.Pings != 4 {
		t.Fatalf("pings applied %d, want 4", st.Pings)
	}
}

func (h *harness) deadLetterReasons() []string {
	var out []string
	for {
		hdr, _, _, ok := h.dlq.NextWithHeaders()
		if !ok {
			return out
		}
		out = append(out, string(hdr[deadletter.HeaderReason]))
	}
}

func TestProcessorDeadLettersInvalidPingsAndContinues(t *testing.T) {
	h := newHarness(t)
	bad := []*geofencepb.Ping{
		{DeviceId: "veh-3", Lat: math.NaN(), Lon: centerLon, DeviceTimeMs: 1, Hlc: 1},
		{DeviceId: "veh-3", Lat: 91, Lon: centerLon, DeviceTimeMs: 1, Hlc: 2},
		{DeviceId: "veh-3", Lat: insideLat, Lon: math.Inf(1), DeviceTimeMs: 1, Hlc: 3},
		{DeviceId: "other", Lat: insideLat, Lon: centerLon, DeviceTimeMs: 1, Hlc: 4},
		{DeviceId: "veh-3", Lat: insideLat, Lon: centerLon, DeviceTimeMs: 0, Hlc: 0},
	}
	for _, p := range bad {
		h.tt.Consume(geofence.TopicPings, "veh-3", p)
	}
	h.tt.Consume(geofence.TopicPings, "", &geofencepb.Ping{Lat: insideLat, Lon: centerLon, DeviceTimeMs: 1, Hlc: 9})
	var reasons []string
	for {
		hdr, key, _, ok := h.dlq.NextWithHeaders()
		if !ok {
			break
		}
		reasons = append(reasons, string(hdr[deadletter.HeaderReason]))
		if string(hdr[deadletter.HeaderSourceTopic]) != geofence.TopicPings {
			t.Fatalf("dead letter source topic %q", hdr[deadletter.HeaderSourceTopic])
		}
		_ = key
	}
	want := []string{"invalid", "invalid", "invalid", "invalid", "invalid", "empty-key"} // the last ping has neither HLC nor device time
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
	if err := h.proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("early timeout: %v", got)
	}
	h.now = time.UnixMilli(1_800_000_003_000).Add(6 * time.Minute)
	if err := h.proc.FireTimers(context.Background()); err != nil {
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
	// Event time, not the sweep's wall clock: last fix + the silence timeout.
	if want := int64(1_800_000_003_000) + (5 * time.Minute).Milliseconds(); got[0].EventTimeMs != want {
		t.Fatalf("timeout exit event time %d, want last fix + timeout = %d (the sweep ran at %d)", got[0].EventTimeMs, want, h.now.UnixMilli())
	}
	// A second sweep finds nothing more to close.
	if err := h.proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("second sweep emitted %v", got)
	}
}

// A candidate ENTER abandoned by the sweep is forgotten for good: a ping long
// after does not complete the stale candidate.
func TestSilenceSweepSavesDroppedCandidate(t *testing.T) {
	h := newHarness(t)
	h.ping("veh-5", insideLat, 0)
	h.ping("veh-5", insideLat, 1000) // 2 of 3 samples: ENTERING
	if st := h.state("veh-5"); len(st.FenceStates) != 1 || st.FenceStates[0].State.GetPhase() != geofencepb.Phase_PHASE_ENTERING {
		t.Fatalf("want ENTERING, got %v", st.GetFenceStates())
	}
	h.now = time.UnixMilli(1_800_000_001_000).Add(6 * time.Minute)
	if err := h.proc.FireTimers(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.tt.Catchup()
	if st := h.state("veh-5"); len(st.FenceStates) != 0 {
		t.Fatalf("the sweep dropped the candidate but did not save it: %v", st.FenceStates)
	}
	h.ping("veh-5", insideLat, 58*60*1000)
	if got := h.nextTriggers(); len(got) != 0 {
		t.Fatalf("a ping 58 minutes later completed the stale candidate: %v", got)
	}
}

// Replaying the loop's tick gives the same TIMEOUT exit: the sweep's wall
// clock only decides when it runs.
func TestSilenceTimeoutIsDeterministic(t *testing.T) {
	run := func(sweepAfter time.Duration) *geofencepb.Trigger {
		h := newHarness(t)
		for i := int64(0); i < 4; i++ {
			h.ping("veh-6", insideLat, i*1000)
		}
		h.nextTriggers()
		h.now = time.UnixMilli(1_800_000_003_000).Add(sweepAfter)
		if err := h.proc.FireTimers(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.tt.Catchup()
		got := h.nextTriggers()
		if len(got) != 1 {
			t.Fatalf("sweep %s after: %v", sweepAfter, got)
		}
		return got[0]
	}
	a, b := run(6*time.Minute), run(36*time.Hour)
	if a.TriggerId != b.TriggerId || a.EventTimeMs != b.EventTimeMs || a.Hlc != b.Hlc {
		t.Fatalf("a sweep 6 min and 36 h after the last fix gave different exits:\n%v\n%v", a, b)
	}
}

// A partition catching up on a backlog (the wall clock far ahead of its event
// time) does not time out a device whose later pings are still queued: the
// silence timer waits for stream time, which follows the backlog.
func TestSilenceWaitsForStreamTimeOnBacklog(t *testing.T) {
	h := newHarness(t)
	h.now = time.UnixMilli(1_800_000_000_000).Add(time.Hour) // an hour of backlog
	fire := func() []*geofencepb.Trigger {
		t.Helper()
		if err := h.proc.FireTimers(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.tt.Catchup()
		return h.nextTriggers()
	}
	for i := int64(0); i < 4; i++ {
		h.ping("veh-a", insideLat, i*1000)
	}
	if got := h.nextTriggers(); len(got) != 1 {
		t.Fatalf("want ENTER, got %v", got)
	}
	h.ping("veh-b", outsideLat, 4*60_000)
	if got := fire(); len(got) != 0 {
		t.Fatalf("timed out at stream time 4 min: %v", got)
	}
	// veh-a's next ping, 8 minutes on: a wall-clock sweep (an hour ahead)
	// would have closed it before this was applied.
	h.ping("veh-a", insideLat, 8*60_000)
	if got := h.nextTriggers(); len(got) != 1 || got[0].Type != geofencepb.TriggerType_TRIGGER_TYPE_DWELL {
		t.Fatalf("want the DWELL of veh-a's 8-minute ping, got %v", got)
	}
	if got := fire(); len(got) != 0 {
		t.Fatalf("timed out a device whose next ping was queued: %v", got)
	}
	// Stream time passes 8 min + the 5 min timeout: now it is silent.
	h.ping("veh-b", outsideLat, 14*60_000)
	got := fire()
	if len(got) != 1 || got[0].Reason != geofencepb.TriggerReason_TRIGGER_REASON_TIMEOUT || got[0].DeviceId != "veh-a" {
		t.Fatalf("want veh-a's TIMEOUT exit, got %v", got)
	}
	if want := int64(1_800_000_000_000) + 13*60_000; got[0].EventTimeMs != want {
		t.Fatalf("timeout stamped %d, want last fix + timeout = %d", got[0].EventTimeMs, want)
	}
}

// Well-formed pings that cannot be real fixes are dead-lettered as
// implausible, not applied (issue 17: accuracy 1e9 widened the fence search to
// every fence; NaN speed and Inf heading were accepted).
func TestProcessorDeadLettersImplausiblePings(t *testing.T) {
	h := newHarness(t)
	bad := []*geofencepb.Ping{
		{AccuracyM: 1e9},
		{AccuracyM: debounce.DefaultMaxAccuracyM + 1},
		{AccuracyM: 3, SpeedMps: math.NaN()},
		{AccuracyM: 3, SpeedMps: math.Inf(1)},
		{AccuracyM: 3, HeadingDeg: math.Inf(-1)},
	}
	for i, p := range bad {
		p.DeviceId, p.Lat, p.Lon, p.DeviceTimeMs, p.Hlc = "veh-4", insideLat, centerLon, 1_800_000_000_000+int64(i), uint64(10+i)
		h.tt.Consume(geofence.TopicPings, "veh-4", p)
	}
	var details []string
	for {
		hdr, _, _, ok := h.dlq.NextWithHeaders()
		if !ok {
			break
		}
		if r := string(hdr[deadletter.HeaderReason]); r != debounce.ReasonImplausible {
			t.Errorf("reason %q (%s), want %q", r, hdr[deadletter.HeaderError], debounce.ReasonImplausible)
		}
		details = append(details, string(hdr[deadletter.HeaderError]))
	}
	if len(details) != len(bad) {
		t.Fatalf("%d dead letters %q, want %d", len(details), details, len(bad))
	}
	for i, want := range []string{"accuracy 1e+09 m is beyond the maximum 10000 m", "accuracy 10001 m", "speed NaN", "speed +Inf", "heading -Inf"} {
		if !strings.Contains(details[i], want) {
			t.Errorf("dead letter %d says %q, want %q in it", i, details[i], want)
		}
	}
	if st := h.state("veh-4"); st != nil && st.Pings != 0 {
		t.Fatalf("implausible pings applied: %v", st)
	}
	// The edge itself is plausible.
	h.tt.Consume(geofence.TopicPings, "veh-4", &geofencepb.Ping{DeviceId: "veh-4", Lat: insideLat, Lon: centerLon, AccuracyM: debounce.DefaultMaxAccuracyM, DeviceTimeMs: 1_800_000_001_000, Hlc: 100})
	if st := h.state("veh-4"); st == nil || st.Pings != 1 {
		t.Fatalf("ping at the maximum accuracy not applied: %v", st)
	}
}

func TestMaxAccuracyOption(t *testing.T) {
	for _, m := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.MaxAccuracy(m)); err == nil {
			t.Errorf("MaxAccuracy(%v) accepted", m)
		}
	}
	// Bad options are refused together, each by its name.
	_, err := debounce.New(geofence.Topology(), testCatalogue(t), debounce.MaxAccuracy(0), debounce.Now(nil), debounce.Registerer(nil))
	for _, want := range []string{"MaxAccuracy: 0 m, must be positive", "Now: nil clock", "Registerer: nil registerer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error containing %q, got %v", want, err)
		}
	}
}
