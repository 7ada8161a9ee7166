package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// skewMetrics are the skew reporter's gauges.
type skewMetrics struct{ partitionRecords, topicSkew, topicSkewAlert *prometheus.GaugeVec }

func newSkewMetrics(reg prometheus.Registerer) (*skewMetrics, error) {
	m := &skewMetrics{
		partitionRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencestream_partition_records",
			Help: "Records held by each partition of a topic, from broker offsets (end - start).",
		}, []string{"topic", "partition"}),
		topicSkew: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencestream_topic_skew",
			Help: "Max over partitions / mean over partitions of a topic's records; above 3 is an alert.",
		}, []string{"topic"}),
		topicSkewAlert: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencestream_topic_skew_alert",
			Help: "1 when a topic's skew is above the alert threshold (3), else 0.",
		}, []string{"topic"}),
	}
	var errs []error
	for _, g := range []**prometheus.GaugeVec{&m.partitionRecords, &m.topicSkew, &m.topicSkewAlert} {
		var err error
		*g, err = collector.Register(reg, *g)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering the skew metrics: %w", err)
	}
	return m, nil
}

// minSkewMean is the mean records per partition below which the reporter does
// not alert.
const minSkewMean = 10

// RunSkewReporter measures the skew of topics from broker offsets every interval
// until ctx ends, exporting fencestream_partition_records and
// fencestream_topic_skew, and logging a warning when a topic crosses the alert.
// Of opts it reads Registerer (default prometheus.DefaultRegisterer), where the
// gauges are registered.
func RunSkewReporter(ctx context.Context, cl cluster.Config, topics []string, every time.Duration, log *slog.Logger, opts ...Opt) error {
	if log == nil {
		log = slog.Default()
	}
	cfg := newConfig(atRun, opts)
	if cfg.registerer == nil {
		return errors.New("skew reporter: Registerer: nil registerer")
	}
	sm, err := newSkewMetrics(cfg.registerer)
	if err != nil {
		return err
	}
	kopts, err := cl.Kgo()
	if err != nil {
		return err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	alerting := map[string]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, topic := range topics {
			rctx, cancel := context.WithTimeout(ctx, every)
			s, err := topology.MeasureSkew(rctx, adm, topic)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.Debug("skew not measured", "topic", topic, "err", err)
				}
				continue
			}
			for p, n := range s.Counts {
				sm.partitionRecords.WithLabelValues(topic, strconv.Itoa(int(p))).Set(float64(n))
			}
			sm.topicSkew.WithLabelValues(topic).Set(s.Ratio)
			alert := 0.0
			// Below a few records per partition the ratio is noise, not a hot key.
			if s.Alert() && s.Mean >= minSkewMean {
				alert = 1
				if !alerting[topic] {
					log.Warn("partition skew above alert threshold", "topic", topic, "skew", s.Ratio, "partition", s.MaxPartition, "records", s.Max, "mean", s.Mean)
				}
			}
			alerting[topic] = alert == 1
			sm.topicSkewAlert.WithLabelValues(topic).Set(alert)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// recoveryCollector reports the table recovery of the processors that run
// with it: one per registry, shared by the processors registered there.
type recoveryCollector struct {
	remaining, recovered *prometheus.Desc
	mu                   sync.Mutex
	procs                map[*Processor]struct{}
}

func newRecoveryCollector() *recoveryCollector {
	return &recoveryCollector{
		remaining: prometheus.NewDesc("fencestream_table_recovery_remaining_records",
			"Records of a group-table partition still to recover (hwm - offset); 0 once recovered.", []string{"group", "partition", "mode"}, nil),
		recovered: prometheus.NewDesc("fencestream_table_recovered",
			"1 when a group-table partition of this instance has recovered (active or hot standby).", []string{"group", "partition", "mode"}, nil),
		procs: map[*Processor]struct{}{},
	}
}

// running adds p to what c reports, until the returned func is called.
func (c *recoveryCollector) running(p *Processor) (done func()) {
	c.mu.Lock()
	c.procs[p] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.procs, p)
		c.mu.Unlock()
	}
}

func (c *recoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.remaining
	ch <- c.recovered
}

func (c *recoveryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	procs := make([]*Processor, 0, len(c.procs))
	for p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	// Two processors of one group in a process (tests do it) report the same
	// labels: their partitions are summed (remaining) and the least recovered
	// wins, one series each, as the registry requires.
	type series struct{ rem, done float64 }
	var order [][3]string
	all := map[[3]string]*series{}
	for _, p := range procs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st := p.gp().StatsWithContext(ctx)
		cancel()
		if st == nil {
			continue
		}
		for part, pp := range st.Group {
			if pp == nil || pp.TableStats == nil {
				continue
			}
			ts := pp.TableStats
			mode := "active"
			if ts.RunMode != 0 {
				mode = "standby"
			}
			rem := 0.0
			if ts.Recovery != nil && ts.Recovery.Hwm > ts.Recovery.Offset+1 {
				rem = float64(ts.Recovery.Hwm - ts.Recovery.Offset - 1)
			}
			done := 0.0
			if ts.Status == goka.PartitionRunning {
				done = 1
			}
			k := [3]string{p.name, strconv.Itoa(int(part)), mode}
			if s := all[k]; s != nil {
				s.rem, s.done = s.rem+rem, min(s.done, done)
				continue
			}
			all[k] = &series{rem, done}
			order = append(order, k)
		}
	}
	for _, k := range order {
		s := all[k]
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, s.rem, k[:]...)
		ch <- prometheus.MustNewConstMetric(c.recovered, prometheus.GaugeValue, s.done, k[:]...)
	}
}
