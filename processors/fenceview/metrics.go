package fenceview

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
)

// statsTimeout bounds one read of Goka's view statistics.
const statsTimeout = 2 * time.Second

type viewStatser interface {
	Recovered() bool
	Stats(ctx context.Context) *goka.ViewStats
}

// viewCollector reports the views registered with registerViewStats. One is
// registered per registry (a second fenceview on the same registry shares
// it); views come and go.
type viewCollector struct {
	mu    sync.Mutex
	views map[string]viewStatser // by table; the latest registration wins
}

var (
	viewRecoveredDesc = prometheus.NewDesc("fencestream_view_recovered",
		"1 once fenceview's view of the table has caught up with it, else 0.", []string{"table"}, nil)
	viewLagDesc = prometheus.NewDesc("fencestream_view_lag_records",
		"Records a view partition is behind its table partition (recovery backlog while recovering; Goka's offset lag after).",
		[]string{"table", "partition"}, nil)
	viewPartitionsRecoveringDesc = prometheus.NewDesc("fencestream_view_partitions_recovering",
		"Partitions of the view that have not reached the running state (recovery progress).", []string{"table"}, nil)
)

func (c *viewCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- viewRecoveredDesc
	ch <- viewLagDesc
	ch <- viewPartitionsRecoveringDesc
}

func (c *viewCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	views := make(map[string]viewStatser, len(c.views))
	for k, v := range c.views {
		views[k] = v
	}
	c.mu.Unlock()
	for table, v := range views {
		rec := 0.0
		if v.Recovered() {
			rec = 1
		}
		ch <- prometheus.MustNewConstMetric(viewRecoveredDesc, prometheus.GaugeValue, rec, table)
		ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
		stats := v.Stats(ctx)
		cancel()
		if stats == nil {
			continue
		}
		recovering := 0
		for p, ts := range stats.Partitions {
			if ts == nil {
				continue
			}
			if ts.Status != goka.PartitionRunning {
				recovering++
			}
			if lag, ok := partitionLag(ts); ok {
				ch <- prometheus.MustNewConstMetric(viewLagDesc, prometheus.GaugeValue, float64(lag), table, strconv.Itoa(int(p)))
			}
		}
		ch <- prometheus.MustNewConstMetric(viewPartitionsRecoveringDesc, prometheus.GaugeValue, float64(recovering), table)
	}
}

// registerViewStats reports v under table on reg (nil: the default
// registry) until the returned func is called.
func registerViewStats(reg prometheus.Registerer, table string, v viewStatser) (unregister func(), err error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	collector, err := collector.Register(reg, &viewCollector{views: map[string]viewStatser{}})
	if err != nil {
		return nil, fmt.Errorf("fenceview: view metrics: %w", err)
	}
	collector.mu.Lock()
	collector.views[table] = v
	collector.mu.Unlock()
	return func() {
		collector.mu.Lock()
		if collector.views[table] == v {
			delete(collector.views, table)
		}
		collector.mu.Unlock()
	}, nil
}

// partitionLag derives how many records a view partition is behind from
// Goka's stats: the recovery backlog (high-water mark - 1 - last recovered
// offset) while recovering, Goka's periodically refreshed offset lag after.
func partitionLag(ts *goka.TableStats) (int64, bool) {
	if ts == nil {
		return 0, false
	}
	if ts.Status != goka.PartitionRunning {
		if ts.Recovery == nil {
			return 0, false
		}
		return max(0, ts.Recovery.Hwm-1-ts.Recovery.Offset), true
	}
	if ts.Input != nil && ts.Input.OffsetLag > 0 {
		// OffsetLag is hwm - last offset: 1 when caught up.
		return max(0, ts.Input.OffsetLag-1), true
	}
	return 0, true
}
