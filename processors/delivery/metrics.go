package delivery

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/collector"
)

// metrics are the delivery module's, on the registerer it is given. Labels
// are subscription ids and endpoint origins: operator-made, so bounded.
type metrics struct {
	attempts      *prometheus.CounterVec // subscription, result
	dead          *prometheus.CounterVec // subscription, reason
	skipped       *prometheus.CounterVec // reason
	breakerOpens  *prometheus.CounterVec // endpoint
	breakerOpen   *prometheus.GaugeVec   // endpoint
	pending       *prometheus.GaugeVec   // subscription (status group)
	lastSuccess   *prometheus.GaugeVec   // subscription (status group)
	latency       prometheus.Histogram
	subscriptions prometheus.Gauge
	rejected      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry() // a test's or a benchmark's: private
	}
	var m metrics
	var errs [10]error
	m.attempts, errs[0] = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_delivery_attempts_total",
		Help: "HTTP deliveries attempted, by subscription and result (delivered, failed, gone).",
	}, []string{"subscription", "result"}))
	m.dead, errs[1] = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_delivery_dead_total",
		Help: "Triggers given up for a subscription (written to delivery-dead), by reason.",
	}, []string{"subscription", "reason"}))
	m.skipped, errs[2] = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_delivery_deferred_total",
		Help: "Attempts not sent but scheduled later, by reason (breaker-open, concurrency).",
	}, []string{"reason"}))
	m.breakerOpens, errs[3] = collector.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_delivery_breaker_opened_total",
		Help: "Times an endpoint's circuit breaker opened.",
	}, []string{"endpoint"}))
	m.breakerOpen, errs[4] = collector.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencestream_delivery_breaker_open",
		Help: "1 while an endpoint's circuit breaker is open or probing, in this process.",
	}, []string{"endpoint"}))
	m.pending, errs[5] = collector.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencestream_delivery_pending",
		Help: "Triggers queued for a subscription and not yet delivered or given up (set by the instance holding the subscription's status).",
	}, []string{"subscription"}))
	m.lastSuccess, errs[6] = collector.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencestream_delivery_last_success_timestamp_seconds",
		Help: "Wall-clock time of a subscription's last successful delivery (set by the instance holding its status).",
	}, []string{"subscription"}))
	m.latency, errs[7] = collector.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencestream_delivery_request_seconds",
		Help:    "Duration of delivery HTTP requests, answered or not.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
	}))
	m.subscriptions, errs[8] = collector.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencestream_delivery_subscriptions",
		Help: "Subscriptions (enabled or not) this process holds.",
	}))
	m.rejected, errs[9] = collector.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencestream_delivery_subscription_records_rejected_total",
		Help: "Records of the subscriptions topic that were not valid subscriptions and were skipped.",
	}))
	return &m, errors.Join(errs[:]...)
}
