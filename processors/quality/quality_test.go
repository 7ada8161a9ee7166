package quality_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/quality"
)

// The goals of issue 13, at a small size: on devices parked within 10 m of
// an edge (σ 5 m per axis, accuracy 5 m, 100 fixes at 1 Hz) the sprt
// detector ends right for >= 95%, fires <= 1.05 triggers per true transition
// and never a second ENTER; on the moving fleet it misses nothing and fires
// nothing spurious.
func TestGoals(t *testing.T) {
	r, err := quality.Run(quality.Config{
		Seed: 1, Devices: 1000, Noise: []float64{5}, AccuracyRatio: []float64{1},
		Moving: 30, MovingFor: 20 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	p := r.Parked[0]
	near := p.Scores[quality.SPRT].Near
	if near.Devices < 400 || near.Inside < 200 {
		t.Fatalf("only %d devices (%d inside) within 10 m: the workload does not test the edge", near.Devices, near.Inside)
	}
	if got := float64(near.Correct) / float64(near.Devices); got < 0.95 {
		t.Errorf("sprt: final state correct for %.1f%% of devices within 10 m, want >= 95%%", 100*got)
	}
	if float64(near.Triggers) > 1.05*float64(near.Inside) {
		t.Errorf("sprt: %d triggers for %d true transitions, want <= 1.05x", near.Triggers, near.Inside)
	}
	if all := p.Scores[quality.SPRT].All; all.SecondEnters != 0 || all.Flapping != 0 {
		t.Errorf("sprt: %d devices with a second ENTER, %d flapping; want 0", all.SecondEnters, all.Flapping)
	}
	// The comparison is real: today's strict rule misses the near devices the
	// issue measured, and a raw detector flaps.
	strict := p.Scores[quality.Strict].Near
	if strict.Correct >= near.Correct || strict.Entered*10 > strict.Inside*8 {
		t.Errorf("strict: %d correct, %d of %d inside entered; the workload no longer shows its weakness", strict.Correct, strict.Entered, strict.Inside)
	}
	if raw := p.Scores[quality.Raw].Near; raw.Flapping < near.Devices/2 {
		t.Errorf("raw detector: only %d of %d devices flapping: too little noise to prove anything", raw.Flapping, near.Devices)
	}

	m := r.Moving
	if m.Transitions < 100 {
		t.Fatalf("moving fleet: %d true transitions, too few", m.Transitions)
	}
	for _, name := range []string{quality.SPRT, quality.Strict} {
		if s := m.Scores[name]; s.Missed != 0 || s.Spurious != 0 || s.Detected != m.Transitions || s.FinalWrong != 0 {
			t.Errorf("moving fleet, %s: %+v; want every one of %d transitions detected once", name, s, m.Transitions)
		}
	}
	if raw := m.Scores[quality.Raw]; raw.Spurious == 0 {
		t.Errorf("moving fleet: the raw detector fired nothing spurious; the scorer cannot see flapping")
	}
}

func TestDeterministicAndJSON(t *testing.T) {
	cfg := quality.Config{Seed: 7, Devices: 60, Noise: []float64{2, 10}, AccuracyRatio: []float64{1}, Fixes: 30, Moving: -1}
	var a, b bytes.Buffer
	for _, w := range []*bytes.Buffer{&a, &b} {
		r, err := quality.Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(w); err != nil {
			t.Fatal(err)
		}
	}
	if a.String() != b.String() {
		t.Fatal("two runs with one seed differ")
	}
	var back struct {
		Detectors []string
		Parked    []struct {
			NoiseM float64 `json:"noise_m"`
			Bands  []string
		}
	}
	if err := json.Unmarshal(a.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Parked) != 2 || back.Parked[1].NoiseM != 10 || len(back.Parked[0].Bands) != 8 ||
		strings.Join(back.Detectors, ",") != strings.Join(quality.Detectors(), ",") {
		t.Fatalf("JSON report: %s", a.String()[:min(400, a.Len())])
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []quality.Config{
		{Devices: -1}, {Fixes: -5}, {Noise: []float64{0}}, {Noise: []float64{-1}},
		{AccuracyRatio: []float64{-2}}, {MaxDistanceM: 1000}, {MovingFor: -time.Second},
	} {
		if _, err := quality.Run(cfg); !errors.Is(err, quality.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// Issue 20's targets on every scenario, at a small size (-short: smaller):
// final state >= 97% right (parked scenarios: >= 95% at this size, which
// holds a few dozen devices within 2 m), no device with a second ENTER, no
// false ENTER beyond 2 m outside, nothing missed by a moving device, and no
// vehicle on the road 5 m outside an edge ever entered. Against it, the sprt
// detector before issue 20 falls for optimistic accuracy.
func TestScenarioTargets(t *testing.T) {
	devices := 200
	if testing.Short() {
		devices = 100
	}
	res, err := quality.RunScenarios(1, devices, nil)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := quality.WriteScenarioTable(&table, 1, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if len(res) != len(quality.Scenarios()) {
		t.Fatalf("%d scenarios, want %d", len(res), len(quality.Scenarios()))
	}
	for _, r := range res {
		s := r.Scores[quality.SPRT]
		want := 0.97
		if s.Owed == s.Devices/2 { // parked: half inside
			want = 0.95
		}
		if got := float64(s.Correct) / float64(s.Devices); got < want {
			t.Errorf("%s: final state right for %.1f%%, want >= %.0f%%", r.Name, 100*got, 100*want)
		}
		for b, n := range s.SecondEnters {
			if n != 0 {
				t.Errorf("%s: %d devices with a second ENTER (band %s)", r.Name, n, quality.ScenarioBands()[b])
			}
		}
		for b, n := range s.FalseEnters[1:] {
			if n != 0 {
				t.Errorf("%s: %d false ENTERs %s outside", r.Name, n, quality.ScenarioBands()[b+1])
			}
		}
		if s.Devices == s.Owed/2 && s.Missed != 0 { // crossing: 2 owed each
			t.Errorf("%s: %d of %d transitions missed", r.Name, s.Missed, s.Owed)
		}
		if r.Name == quality.ScenarioRoad && s.Correct != s.Devices {
			t.Errorf("road: %d of %d vehicles entered", s.Devices-s.Correct, s.Devices)
		}
	}
	for _, r := range res {
		if r.Name == quality.ScenarioOptimistic {
			if old := r.Scores[quality.SPRTBefore]; old.FalseEnters[0]+old.FalseEnters[1] <= r.Scores[quality.SPRT].FalseEnters[0] {
				t.Errorf("optimistic accuracy: the old sprt detector has %v false ENTERs, the new %v; the scenario shows nothing", old.FalseEnters, r.Scores[quality.SPRT].FalseEnters)
			}
		}
	}
}
