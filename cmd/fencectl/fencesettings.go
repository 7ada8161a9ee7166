package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
)

// settingsHeader names the debounce columns of the fence listing.
const settingsHeader = "DETECTOR\tSAMPLES\tMIN DWELL\tHYSTERESIS\tLOITER\tTIMEOUT"

// settingsColumns are a fence's effective debounce settings: its own
// overrides, marked "*", over the debouncer's built-in defaults.
func settingsColumns(p *pb.Fence) string {
	o := p.GetSettings()
	eff := debounce.Resolve(debounce.DefaultSettings(), o)
	mark := func(s string, own bool) string {
		if own {
			return s + "*"
		}
		return s
	}
	return strings.Join([]string{
		mark(eff.Detector.String(), o.GetDetector() != ""),
		mark(strconv.Itoa(eff.MinSamples), o.GetMinSamples() != 0),
		mark(shortDuration(eff.MinDwell), o.GetMinDwellMs() != 0),
		mark(strconv.FormatFloat(eff.Hysteresis, 'f', -1, 64)+" m", o.GetHysteresisM() != 0),
		mark(shortDuration(eff.Loiter), o.GetLoiterMs() != 0),
		mark(shortDuration(eff.SilenceTimeout), o.GetSilenceTimeoutMs() != 0),
	}, "\t")
}

// settingsLegend explains the marks and where the unmarked values come from.
func settingsLegend() string {
	d := debounce.DefaultSettings()
	return fmt.Sprintf("* = set by the fence; other values are the debouncer's built-in defaults "+
		"(%s, %d samples, %s, %g m, %s, %s), which its --detector, --min-samples, --min-dwell, "+
		"--hysteresis, --loiter and --silence-timeout flags change",
		d.Detector, d.MinSamples, shortDuration(d.MinDwell), d.Hysteresis, shortDuration(d.Loiter), shortDuration(d.SilenceTimeout))
}

// shortDuration prints 5m rather than 5m0s, 1h30m rather than 1h30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
