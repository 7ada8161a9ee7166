package fleet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology"
)

func TestParseKeying(t *testing.T) {
	for _, k := range Keyings() {
		got, err := ParseKeying(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKeying(%q) = %v, %v", k.String(), got, err)
		}
		if got, err := ParseKeying(" " + strings.ToUpper(k.String()) + " "); err != nil || got != k {
			t.Errorf("ParseKeying(upper %q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseKeying("fence-id-ish"); err == nil {
		t.Error("unknown keying accepted")
	}
	if s := Keying(99).String(); s != "Keying(99)" {
		t.Errorf("String() of an unknown keying: %q", s)
	}
}

func TestKeyFor(t *testing.T) {
	tr := &geofencepb.Trigger{DeviceId: "veh-0001", FenceId: "airport-ber"}
	for k, want := range map[Keying]string{KeyDevice: "veh-0001", KeyFence: "airport-ber", KeyPair: "veh-0001|airport-ber", KeyRoundRobin: "", KeyNull: ""} {
		if got := KeyFor(tr, k); got != want {
			t.Errorf("KeyFor(%v) = %q, want %q", k, got, want)
		}
	}
}

// TestMisordering replays the truth of the full fleet as triggers through
// 24 partitions and 8 consumers (the seed's benchmark shape) under every
// keying strategy.
func TestMisordering(t *testing.T) {
	s := newSim(t, fullFleet)
	trigs := s.Truth().Triggers()
	if len(trigs) < 1000 {
		t.Fatalf("only %d triggers", len(trigs))
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "%d triggers, 24 partitions, 8 consumers\n%-12s %22s %6s\n", len(trigs), "strategy", "misordered pairs / 1M", "skew")
	for _, k := range Keyings() {
		mis, skew := MeasureMisordering(trigs, k, 24, 8, 1)
		fmt.Fprintf(&tab, "%-12s %22.0f %6.2f\n", k, mis, skew)
		if k == KeyDevice {
			if mis != 0 {
				t.Errorf("device keying misordered %v pairs per million", mis)
			}
		} else if mis <= 0 {
			t.Errorf("%v keying misordered nothing", k)
		}
		if skew < 1 {
			t.Errorf("%v: skew %v < 1", k, skew)
		}
		again, skew2 := MeasureMisordering(trigs, k, 24, 8, 1)
		if again != mis || skew2 != skew {
			t.Errorf("%v: not reproducible: %v/%v then %v/%v", k, mis, skew, again, skew2)
		}
	}
	t.Log("\n" + tab.String())

	// Device keying never reorders a device, whatever the shape and seed.
	for _, shape := range []struct {
		p int32
		c int
	}{{1, 1}, {3, 2}, {24, 8}, {24, 30}, {7, 3}} {
		for seed := range int64(5) {
			if mis, _ := MeasureMisordering(trigs, KeyDevice, shape.p, shape.c, seed); mis != 0 {
				t.Errorf("device keying, %d partitions, %d consumers, seed %d: %v", shape.p, shape.c, seed, mis)
			}
		}
	}
	// Skew is computed with the pinned partitioner.
	counts := make([]int, 24)
	for _, tr := range trigs {
		counts[topology.PartitionFor(tr.GetFenceId(), 24)]++
	}
	mx := 0
	for _, c := range counts {
		mx = max(mx, c)
	}
	if _, skew := MeasureMisordering(trigs, KeyFence, 24, 8, 1); skew != float64(mx)/(float64(len(trigs))/24) {
		t.Errorf("fence skew %v, want %v", skew, float64(mx)/(float64(len(trigs))/24))
	}
	// Degenerate inputs.
	if mis, skew := MeasureMisordering(nil, KeyFence, 24, 8, 1); mis != 0 || skew != 0 {
		t.Errorf("empty input: %v, %v", mis, skew)
	}
	if mis, _ := MeasureMisordering(trigs, KeyNull, 0, 0, 1); mis != 0 {
		t.Errorf("one partition, one consumer reorders: %v", mis)
	}
}

func TestTruthTriggers(t *testing.T) {
	s := newSim(t, Config{Seed: 2, Moving: 10, Duration: 20 * time.Minute})
	tr := s.Truth()
	trigs := tr.Triggers()
	last := map[string]uint64{}
	for i, g := range trigs {
		x := tr.Transitions[i]
		if g.GetDeviceId() != x.DeviceID || g.GetFenceId() != x.FenceID || g.GetType() != x.Type || g.GetEventTimeMs() != x.TimeMs {
			t.Fatalf("trigger %d %v does not match %+v", i, g, x)
		}
		if g.GetHlc() <= last[g.GetDeviceId()] {
			t.Fatalf("trigger %d: HLC does not increase for %s", i, g.GetDeviceId())
		}
		last[g.GetDeviceId()] = g.GetHlc()
	}
}
