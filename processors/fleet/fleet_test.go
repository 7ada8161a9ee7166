package fleet

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"google.golang.org/protobuf/proto"
)

func newSim(t testing.TB, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg, fences.Demo())
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return s
}

// fullFleet is the fleet of the package's stated budget: 200 moving and 50
// parked devices over 30 minutes at 1 Hz.
var fullFleet = Config{Seed: 7, Moving: 200, Parked: 50, Duration: 30 * time.Minute}

func TestDeterminism(t *testing.T) {
	cfg := Config{Seed: 42, Moving: 20, Parked: 10, Duration: 15 * time.Minute}
	a, b := newSim(t, cfg), newSim(t, cfg)
	pa, pb := a.Pings(), b.Pings()
	if len(pa) != 30*15*60 || len(pa) != len(pb) {
		t.Fatalf("got %d and %d pings, want %d", len(pa), len(pb), 30*15*60)
	}
	for i := range pa {
		if !proto.Equal(pa[i], pb[i]) {
			t.Fatalf("ping %d differs: %v vs %v", i, pa[i], pb[i])
		}
	}
	if !reflect.DeepEqual(a.Truth(), b.Truth()) {
		t.Fatal("same seed, different truth")
	}
	// A second call on the same Sim replays the same noise.
	for i, p := range a.Pings() {
		if !proto.Equal(p, pa[i]) {
			t.Fatalf("second Pings() call differs at %d", i)
		}
	}

	cfg.Seed = 43
	c := newSim(t, cfg)
	pc := c.Pings()
	same := 0
	for i := range pa {
		if pa[i].GetLat() == pc[i].GetLat() && pa[i].GetLon() == pc[i].GetLon() {
			same++
		}
	}
	if same > 0 {
		t.Errorf("different seed: %d of %d pings at identical positions", same, len(pa))
	}
	if reflect.DeepEqual(a.Truth().Transitions, c.Truth().Transitions) {
		t.Error("different seed, identical transitions")
	}
}

func TestPingOrderAndFields(t *testing.T) {
	cfg := Config{Seed: 1, Moving: 5, Parked: 3, Duration: 10 * time.Minute, Interval: 2 * time.Second, StampHLC: true,
		Start: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := newSim(t, cfg)
	ids := s.Devices()
	if ids[0] != "veh-0001" || ids[4] != "veh-0005" || ids[5] != "park-0001" || ids[7] != "park-0003" {
		t.Fatalf("device ids %v", ids)
	}
	ps := s.Pings()
	if want := 8 * 300; len(ps) != want || s.Ticks() != 300 {
		t.Fatalf("%d pings, %d ticks; want %d, 300", len(ps), s.Ticks(), want)
	}
	start := cfg.Start.UnixMilli()
	for i, p := range ps {
		tick, dev := i/len(ids), i%len(ids)
		if p.GetDeviceId() != ids[dev] || p.GetDeviceTimeMs() != start+int64(tick)*2000 {
			t.Fatalf("ping %d: %s at %d, want %s at %d", i, p.GetDeviceId(), p.GetDeviceTimeMs(), ids[dev], start+int64(tick)*2000)
		}
		if p.GetHlc() == 0 || p.GetAccuracyM() != 5 {
			t.Fatalf("ping %d: hlc %d accuracy %v", i, p.GetHlc(), p.GetAccuracyM())
		}
		if i >= len(ids) && p.GetHlc() <= ps[i-len(ids)].GetHlc() {
			t.Fatalf("ping %d: HLC does not increase for %s", i, p.GetDeviceId())
		}
		sp := p.GetSpeedMps()
		if dev < 5 && sp != 0 && math.Abs(sp-DefaultSpeedMPS) > 1e-6 {
			t.Fatalf("ping %d: speed %v", i, sp)
		}
		if dev >= 5 && sp != 0 {
			t.Fatalf("parked ping %d moves at %v", i, sp)
		}
		if h := p.GetHeadingDeg(); h < 0 || h >= 360 {
			t.Fatalf("ping %d: heading %v", i, h)
		}
	}
	// HLC is left to the producer by default.
	cfg.StampHLC = false
	if p := newSim(t, cfg).Pings()[0]; p.GetHlc() != 0 {
		t.Fatalf("HLC stamped without StampHLC: %d", p.GetHlc())
	}
}

// truePositions replays the noise-free position of every device at every
// tick.
func truePositions(s *Sim, fn func(tick int64, dev int, lat, lon float64)) {
	for dev := range s.routes {
		r := &s.routes[dev]
		cursor := 0
		for i := range s.ticks {
			x, y, _, _ := r.at(float64(i*s.intervalMs), &cursor)
			lat, lon := r.p.latLon(x, y)
			fn(i, dev, lat, lon)
		}
	}
}

func TestTruth(t *testing.T) {
	t0 := time.Now()
	s := newSim(t, fullFleet)
	t.Logf("New: %v for %d moving + %d parked over %v (%d route attempts)", time.Since(t0), fullFleet.Moving, fullFleet.Parked, fullFleet.Duration, s.Stats().RouteAttempts)
	checkTruth(t, s)
}

func TestTruthLap(t *testing.T) {
	s := newSim(t, Config{Seed: 3, Moving: 40, Parked: 10, Lap: 20 * time.Minute})
	if s.Span() != 20*time.Minute {
		t.Fatalf("span %v", s.Span())
	}
	checkTruth(t, s)
	// Every moving device is back at its start, outside every fence, at the
	// end of the lap: each (device, fence) ends with an EXIT.
	for _, ids := range s.Truth().FinalInside {
		for _, id := range ids {
			if id[:4] == "veh-" {
				t.Errorf("%s inside a fence at the end of its lap", id)
			}
		}
	}
}

func checkTruth(t *testing.T, s *Sim) {
	t.Helper()
	tr := s.Truth()
	cfg := s.Config()
	start := cfg.Start.UnixMilli()
	type key struct{ dev, fence string }
	last := map[key]Transition{}
	perDevice := map[string]int{}
	for _, x := range tr.Transitions {
		if _, parked := tr.Parked[x.DeviceID]; parked {
			t.Fatalf("parked device in transitions: %+v", x)
		}
		k := key{x.DeviceID, x.FenceID}
		prev, seen := last[k]
		wantType := geofencepb.TriggerType_TRIGGER_TYPE_ENTER
		if seen && prev.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
			wantType = geofencepb.TriggerType_TRIGGER_TYPE_EXIT
		}
		if x.Type != wantType {
			t.Fatalf("%+v follows %+v: want %v", x, prev, wantType)
		}
		if seen && x.TimeMs-prev.TimeMs < cfg.MinGap.Milliseconds() {
			t.Fatalf("%+v only %dms after %+v", x, x.TimeMs-prev.TimeMs, prev)
		}
		last[k] = x
		perDevice[x.DeviceID]++
	}
	for _, id := range s.Devices()[:cfg.Moving] {
		if perDevice[id] == 0 {
			t.Errorf("%s has no transition", id)
		}
	}
	t.Logf("%d transitions for %d moving devices", len(tr.Transitions), cfg.Moving)

	// FinalInside agrees with the transitions and the parked truth.
	inside := map[key]bool{}
	for fence, ids := range tr.FinalInside {
		if len(ids) == 0 {
			t.Errorf("%s: empty entry", fence)
		}
		for i, id := range ids {
			if i > 0 && ids[i-1] >= id {
				t.Errorf("%s: devices not sorted: %v", fence, ids)
			}
			inside[key{id, fence}] = true
		}
	}
	for k, x := range last {
		if (x.Type == geofencepb.TriggerType_TRIGGER_TYPE_ENTER) != inside[k] {
			t.Errorf("%v: last transition %v but finally inside = %v", k, x.Type, inside[k])
		}
	}
	for k := range inside {
		if _, parked := tr.Parked[k.dev]; !parked && last[k].Type != geofencepb.TriggerType_TRIGGER_TYPE_ENTER {
			t.Errorf("%v finally inside without an ENTER", k)
		}
	}
	if len(tr.Parked) != cfg.Parked {
		t.Fatalf("%d parked truths, want %d", len(tr.Parked), cfg.Parked)
	}
	far := 0
	for id, p := range tr.Parked {
		if inside[key{id, p.FenceID}] != p.Inside {
			t.Errorf("%s: parked inside=%v but FinalInside says %v", id, p.Inside, !p.Inside)
		}
		switch {
		case math.Abs(p.DistanceM-cfg.ParkedOffsetM) < 1e-3:
		case math.Abs(p.DistanceM-cfg.ParkedFarM) < 1e-3:
			far++
		default:
			t.Errorf("%s: %v m from the edge", id, p.DistanceM)
		}
	}
	if far != cfg.FarParked {
		t.Errorf("%d far parked devices, want %d", far, cfg.FarParked)
	}

	// Independent check: brute-force containment of the noise-free path
	// against every fence gives exactly the transitions.
	fs := s.snap.All()
	var got []Transition
	prevIn := make([][]bool, cfg.Moving)
	ids := s.Devices()
	truePositions(s, func(tick int64, dev int, lat, lon float64) {
		if prevIn[dev] == nil {
			prevIn[dev] = make([]bool, len(fs))
		}
		for j := range fs {
			in := fs[j].Contains(lat, lon)
			if tick == 0 && in {
				t.Fatalf("%s starts inside %s", ids[dev], fs[j].ID)
			}
			if in != prevIn[dev][j] {
				typ := geofencepb.TriggerType_TRIGGER_TYPE_EXIT
				if in {
					typ = geofencepb.TriggerType_TRIGGER_TYPE_ENTER
				}
				got = append(got, Transition{ids[dev], fs[j].ID, typ, start + tick*s.intervalMs})
				prevIn[dev][j] = in
			}
		}
	})
	if len(got) != len(tr.Transitions) {
		t.Fatalf("brute force finds %d transitions, truth has %d", len(got), len(tr.Transitions))
	}
	want := map[Transition]bool{}
	for _, x := range tr.Transitions {
		want[x] = true
	}
	for _, x := range got {
		if !want[x] {
			t.Fatalf("brute force transition %+v not in truth", x)
		}
	}
}

func TestNoise(t *testing.T) {
	for _, sigma := range []float64{5, 12} {
		s := newSim(t, Config{Seed: 9, Moving: 1, Parked: 50, Duration: 30 * time.Minute, NoiseSigmaM: sigma})
		var n, sum, sumSq float64
		devs := len(s.Devices())
		for i, p := range s.Pings() {
			dev := i % devs
			if dev == 0 {
				continue
			}
			pk := s.parked[dev-1]
			dy := (p.GetLat() - pk.lat) * metresPerDegree
			dx := wrapLon(p.GetLon()-pk.lon) * metresPerDegree * math.Cos(pk.lat*degToRad)
			for _, v := range []float64{dx, dy} {
				n++
				sum += v
				sumSq += v * v
			}
			if p.GetAccuracyM() != sigma {
				t.Fatalf("accuracy %v, want σ %v", p.GetAccuracyM(), sigma)
			}
		}
		mean := sum / n
		sd := math.Sqrt(sumSq/n - mean*mean)
		t.Logf("σ=%v: %v samples, mean %.3f m, sample σ %.3f m", sigma, n, mean, sd)
		if math.Abs(sd-sigma) > 0.1*sigma || math.Abs(mean) > 0.05*sigma {
			t.Errorf("σ=%v: sample σ %.3f, mean %.3f", sigma, sd, mean)
		}
	}
}

func TestStream(t *testing.T) {
	cfg := Config{Seed: 5, Moving: 4, Parked: 2, Duration: 5 * time.Minute}
	s := newSim(t, cfg)
	want := s.Pings()
	var got []*geofencepb.Ping
	if err := s.Stream(context.Background(), func(p *geofencepb.Ping) bool { got = append(got, p); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Stream gave %d pings, Pings %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("ping %d: Stream %v, Pings %v", i, got[i], want[i])
		}
	}

	// fn returning false stops it.
	n := 0
	if err := s.Stream(context.Background(), func(*geofencepb.Ping) bool { n++; return n < 10 }); err != nil || n != 10 {
		t.Fatalf("stop after 10: err %v, %d calls", err, n)
	}

	// Cancelling the context stops an endless stream, mid-tick.
	forever := newSim(t, Config{Seed: 5, Moving: 4, Parked: 2, Lap: 5 * time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	var lastTime int64
	err := forever.Stream(ctx, func(p *geofencepb.Ping) bool {
		n++
		if p.GetDeviceTimeMs() < lastTime {
			t.Fatalf("event time went back at ping %d", n)
		}
		lastTime = p.GetDeviceTimeMs()
		if n == 6*700+3 { // past two laps of 300 ticks
			cancel()
		}
		return true
	})
	if !errors.Is(err, context.Canceled) || n != 6*700+3 {
		t.Fatalf("after cancel: err %v, %d calls", err, n)
	}
	if want := forever.Config().Start.UnixMilli() + 700_000; lastTime != want {
		t.Fatalf("last event time %d, want %d", lastTime, want)
	}

	// The lap repeats: a moving device's noise-free position is periodic,
	// so pings one lap apart are within noise of each other.
	var lap1, lap2 []*geofencepb.Ping
	i := 0
	_ = forever.Stream(context.Background(), func(p *geofencepb.Ping) bool {
		if i < 6*300 {
			lap1 = append(lap1, p)
		} else {
			lap2 = append(lap2, p)
		}
		i++
		return i < 2*6*300
	})
	for k := range lap1 {
		dy := (lap1[k].GetLat() - lap2[k].GetLat()) * metresPerDegree
		if math.Abs(dy) > 60 {
			t.Fatalf("ping %d: one lap later %v m away in latitude", k, dy)
		}
	}
}

func TestStreamPace(t *testing.T) {
	s := newSim(t, Config{Seed: 5, Moving: 1, Parked: 1, Duration: 11 * time.Second, Pace: 200}) // 5ms a tick
	t0 := time.Now()
	n := 0
	if err := s.Stream(context.Background(), func(*geofencepb.Ping) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); n != 22 || el < 45*time.Millisecond {
		t.Fatalf("%d pings in %v, want 22 in >= 50ms", n, el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	slow := newSim(t, Config{Seed: 5, Moving: 1, Parked: 1, Duration: time.Hour, Pace: 1})
	if err := slow.Stream(ctx, func(*geofencepb.Ping) bool { return true }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paced stream after deadline: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	demo := fences.Demo()
	for name, tc := range map[string]struct {
		cfg Config
		fs  []fences.Fence
	}{
		"negative moving": {Config{Moving: -1}, demo},
		"negative noise":  {Config{Moving: 1, NoiseSigmaM: -1}, demo},
		"NaN speed":       {Config{Moving: 1, SpeedMPS: math.NaN()}, demo},
		"tiny interval":   {Config{Moving: 1, Interval: time.Microsecond}, demo},
		"negative dur":    {Config{Moving: 1, Duration: -time.Second}, demo},
		"short lap":       {Config{Moving: 1, Lap: time.Minute}, demo},
		"too many far":    {Config{Parked: 2, FarParked: 3}, demo},
		"no fences":       {Config{Moving: 1, Duration: time.Minute}, nil},
		"duplicate ids":   {Config{Moving: 1, Duration: time.Minute}, append(demo[:2:2], demo[0])},
	} {
		if _, err := New(tc.cfg, tc.fs); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
	// Defaults.
	s := newSim(t, Config{Moving: 1, Duration: time.Minute, Interval: 1500 * time.Millisecond})
	c := s.Config()
	if c.NoiseSigmaM != 5 || c.AccuracyM != 5 || c.SpeedMPS != 12 || c.MinGap != time.Minute || c.ParkedOffsetM != 5 ||
		c.HysteresisM != 25 || !c.Start.Equal(DefaultStart()) || c.Interval != 1500*time.Millisecond {
		t.Errorf("defaults: %+v", c)
	}
	if s.Ticks() != 40 {
		t.Errorf("%d ticks in a minute at 1.5s", s.Ticks())
	}
}

func BenchmarkNew(b *testing.B) {
	fs := fences.Demo()
	for b.Loop() {
		if _, err := New(fullFleet, fs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPings(b *testing.B) {
	s := newSim(b, fullFleet)
	for b.Loop() {
		_ = s.Pings()
	}
}
