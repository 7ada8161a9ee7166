package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metricSums adds up every series of the named counters and gauges in the
// default registry, where all in-process components export theirs.
func metricSums(names ...string) map[string]float64 {
	out := make(map[string]float64, len(names))
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for _, f := range families {
		if !want[f.GetName()] {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[f.GetName()] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

const (
	metricPingsProcessed = "fencestream_pings_processed_total"
	metricTriggers       = "fencestream_triggers_total"
	metricDeadLetters    = "fencestream_deadletters_total"
	metricOccupancyLag   = "fencestream_occupancy_lag_records"
)

// reportProgress logs one line every interval: pings sent and processed per
// second, triggers, dead letters and the occupancy processor's lag.
func reportProgress(ctx context.Context, every time.Duration, sim *simulator, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	prevSent, prevProcessed, prevT := sim.Sent(), 0.0, time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			m := metricSums(metricPingsProcessed, metricTriggers, metricDeadLetters, metricOccupancyLag)
			secs := now.Sub(prevT).Seconds()
			sent, processed := sim.Sent(), m[metricPingsProcessed]
			log.Info("progress",
				"pings_sent_per_s", fmt.Sprintf("%.0f", float64(sent-prevSent)/secs),
				"pings_processed_per_s", fmt.Sprintf("%.0f", (processed-prevProcessed)/secs),
				"triggers", int64(m[metricTriggers]),
				"dead_letters", int64(m[metricDeadLetters]),
				"occupancy_lag", int64(m[metricOccupancyLag]))
			prevSent, prevProcessed, prevT = sent, processed, now
		}
	}
}
