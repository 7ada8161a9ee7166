package fenceview

import (
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
)

// SettingsJSON is a fence's effective debounce settings: its own settings
// over the debouncer's defaults, as the debouncer applies them.
type SettingsJSON struct {
	MinSamples      int     `json:"min_samples"`
	MinDwellS       float64 `json:"min_dwell_s"`
	HysteresisM     float64 `json:"hysteresis_m"`
	LoiterS         float64 `json:"loiter_s"`
	SilenceTimeoutS float64 `json:"silence_timeout_s"`
	// Detector is the rule that confirms transitions (sprt or strict).
	Detector string `json:"detector"`
	// Own lists the settings the fence sets itself (GeoJSON property
	// names); the others are the defaults.
	Own []string `json:"own"`
}

// effectiveSettings resolves f's settings over defaults with
// debounce.Resolve, the debouncer's own rule.
func effectiveSettings(defaults debounce.Settings, f *fences.Fence) *SettingsJSON {
	fs := f.Settings
	p := &geofencepb.DebounceSettings{
		MinSamples:       fs.MinSamples,
		MinDwellMs:       fs.MinDwell.Milliseconds(),
		HysteresisM:      fs.HysteresisM,
		LoiterMs:         fs.Loiter.Milliseconds(),
		SilenceTimeoutMs: fs.SilenceTimeout.Milliseconds(),
		Detector:         fs.Detector,
	}
	s := debounce.Resolve(defaults, p)
	out := &SettingsJSON{
		MinSamples: s.MinSamples, MinDwellS: s.MinDwell.Seconds(), HysteresisM: s.Hysteresis,
		LoiterS: s.Loiter.Seconds(), SilenceTimeoutS: s.SilenceTimeout.Seconds(), Detector: string(s.Detector), Own: []string{},
	}
	for _, o := range []struct {
		name string
		set  bool
	}{
		{"min_samples", p.MinSamples != 0}, {"min_dwell_s", p.MinDwellMs != 0}, {"hysteresis_m", p.HysteresisM != 0},
		{"loiter_s", p.LoiterMs != 0}, {"silence_timeout_s", p.SilenceTimeoutMs != 0}, {"detector", p.Detector != ""},
	} {
		if o.set {
			out.Own = append(out.Own, o.name)
		}
	}
	return out
}
