package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
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
	metricOccupancyLag   = "fencestream_occupancy_lag_records"
)

// totals are the pipeline's running totals as the broker holds them, so they
// continue across restarts (in-process counters start again from 0).
type totals struct {
	pings, processed, triggers, deadLetters int64
}

// brokerTotals sums the end offsets of the pings, fence-triggers and
// deadletter topics and the debouncer group's committed offsets on pings.
func brokerTotals(ctx context.Context, adm *kadm.Client) (totals, error) {
	var t totals
	ends, err := adm.ListEndOffsets(ctx, geofence.TopicPings, geofence.TopicTriggers, topology.TopicDeadLetter)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return t, fmt.Errorf("end offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		switch o.Topic {
		case geofence.TopicPings:
			t.pings += o.Offset
		case geofence.TopicTriggers:
			t.triggers += o.Offset
		case topology.TopicDeadLetter:
			t.deadLetters += o.Offset
		}
	})
	committed, err := adm.FetchOffsets(ctx, geofence.GroupDebouncer)
	if err != nil {
		return t, fmt.Errorf("offsets of group %s: %w", geofence.GroupDebouncer, err)
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == geofence.TopicPings && o.Err == nil && o.At > 0 {
			t.processed += o.At
		}
	})
	return t, nil
}

// reportProgress logs one line every interval: pings sent and processed per
// second, the totals of pings, triggers and dead letters (from the broker, so
// a restart continues them), and the occupancy processor's lag.
func reportProgress(ctx context.Context, every time.Duration, sim *simulator, adm *kadm.Client, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	prevSent, prevProcessed, prevT := sim.Sent(), 0.0, time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			m := metricSums(metricPingsProcessed, metricOccupancyLag)
			secs := now.Sub(prevT).Seconds()
			sent, processed := sim.Sent(), m[metricPingsProcessed]
			attrs := []any{
				"pings_sent_per_s", fmt.Sprintf("%.0f", float64(sent-prevSent)/secs),
				"pings_processed_per_s", fmt.Sprintf("%.0f", (processed-prevProcessed)/secs),
			}
			qctx, cancel := context.WithTimeout(ctx, every)
			tot, err := brokerTotals(qctx, adm)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Debug("progress: totals unavailable", "err", err)
			} else {
				attrs = append(attrs, "pings", tot.pings, "pings_processed", tot.processed,
					"triggers", tot.triggers, "dead_letters", tot.deadLetters)
			}
			attrs = append(attrs, "occupancy_lag", int64(m[metricOccupancyLag]))
			log.Info("progress", attrs...)
			prevSent, prevProcessed, prevT = sent, processed, now
		}
	}
}
