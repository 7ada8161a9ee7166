package quality

import (
	"fmt"
	"slices"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
)

// movingNoiseM is the moving fleet's GPS noise, σ per axis (accuracy the same).
const movingNoiseM = 5

// matchSlack lets a trigger match a true transition up to this long after
// it: detectors without debouncing fire on the noisy fix before the truth.
const matchSlack = 30 * time.Second

func runMoving(cfg Config) (*MovingWorkload, error) {
	cat := fences.New()
	if err := cat.Apply(1, fences.Demo(), nil); err != nil {
		return nil, fmt.Errorf("quality: demo fences: %w", err)
	}
	snap := cat.Snapshot()
	sim, err := fleet.New(fleet.Config{
		Seed: cfg.Seed, Moving: cfg.Moving, Parked: 0, NoiseSigmaM: movingNoiseM,
		Interval: time.Second, Duration: cfg.MovingFor, StampHLC: true,
	}, snap.All())
	if err != nil {
		return nil, fmt.Errorf("quality: moving fleet: %w", err)
	}
	byDevice := map[string][]*geofencepb.Ping{}
	for _, p := range sim.Pings() {
		byDevice[p.DeviceId] = append(byDevice[p.DeviceId], p)
	}
	devices := sim.Devices()
	truth := sim.Truth()
	type pair struct{ dev, fence string }
	want := map[pair][]fleet.Transition{}
	for _, tr := range truth.Transitions {
		k := pair{tr.DeviceID, tr.FenceID}
		want[k] = append(want[k], tr)
	}
	owed := map[string]int{} // true transitions per device
	for _, tr := range truth.Transitions {
		owed[tr.DeviceID]++
	}
	finalIn := map[pair]bool{}
	finalOf := map[string][]string{} // fences each device truly ends inside
	for f, devs := range truth.FinalInside {
		for _, d := range devs {
			finalIn[pair{d, f}] = true
			finalOf[d] = append(finalOf[d], f)
		}
	}

	w := &MovingWorkload{Devices: cfg.Moving, NoiseM: movingNoiseM, Transitions: len(truth.Transitions), Scores: map[string]*MovingScore{}}
	dets := detectorsFor(snap, nil)
	for _, name := range Detectors() {
		d, ok := dets[name]
		if !ok {
			continue
		}
		outs := make([]outcome, len(devices))
		parallel(len(devices), func(i int) { outs[i] = d.run(byDevice[devices[i]]) })
		s := &MovingScore{}
		var delays []float64
		for i, dev := range devices {
			o := outs[i]
			have := map[string][]trig{}
			for _, t := range o.trigs {
				have[t.fence] = append(have[t.fence], t)
			}
			for fence, hs := range have {
				ws := want[pair{dev, fence}]
				last := -1 // index of the last matched true transition
				for _, h := range hs {
					// The latest true transition of the trigger's type, after
					// the last one matched, at or before the trigger (with slack).
					k := -1
					for j := last + 1; j < len(ws); j++ {
						if ws[j].TimeMs > h.timeMs+matchSlack.Milliseconds() {
							break
						}
						if ws[j].Type == h.typ {
							k = j
						}
					}
					if k < 0 {
						s.Spurious++
						continue
					}
					last = k
					s.Detected++
					delays = append(delays, float64(h.timeMs-ws[k].TimeMs)/1000)
				}
			}
			s.Missed += owed[dev]
			// Final state per (device, fence) over every fence either side
			// thinks the device is inside.
			for f := range o.inside {
				if !finalIn[pair{dev, f}] {
					s.FinalWrong++
				}
			}
			for _, f := range finalOf[dev] {
				if !o.inside[f] {
					s.FinalWrong++
				}
			}
		}
		s.Missed -= s.Detected
		slices.Sort(delays)
		s.DelayP50S, s.DelayP95S, s.DelayMaxS = -1, -1, -1
		if len(delays) > 0 {
			s.DelayP50S, s.DelayP95S, s.DelayMaxS = quantile(delays, 0.5), quantile(delays, 0.95), delays[len(delays)-1]
		}
		w.Scores[name] = s
	}
	return w, nil
}
