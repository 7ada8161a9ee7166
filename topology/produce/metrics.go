package produce

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/topology"
)

var (
	recordsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_producer_records_total",
		Help: "Records the broker acknowledged, by topic.",
	}, []string{"topic"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_producer_errors_total",
		Help: "Records the client failed to deliver, by topic.",
	}, []string{"topic"})
	rejectedKeysTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_producer_rejected_keys_total",
		Help: "Records refused before sending because of their key, by topic and reason (empty, invalid_utf8, too_long).",
	}, []string{"topic", "reason"})
	hotKeysTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_hot_keys_total",
		Help: "Hot-key decisions, by topic and decision (salted: split, per-key order lost; reported: order kept).",
	}, []string{"topic", "decision"})
)

// registerMetrics registers the producer's metrics on reg (again: harmless).
func registerMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{recordsTotal, errorsTotal, rejectedKeysTotal, hotKeysTotal} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// Reason label values of fencestream_producer_rejected_keys_total.
const (
	ReasonEmpty       = "empty"
	ReasonInvalidUTF8 = "invalid_utf8"
	ReasonTooLong     = "too_long"
)

// Decision label values of fencestream_hot_keys_total.
const (
	DecisionSalted   = "salted"
	DecisionReported = "reported"
)

func rejectReason(err error) string {
	switch {
	case errors.Is(err, topology.ErrEmptyKey):
		return ReasonEmpty
	case errors.Is(err, topology.ErrInvalidUTF8):
		return ReasonInvalidUTF8
	case errors.Is(err, topology.ErrKeyTooLong):
		return ReasonTooLong
	default:
		return "other"
	}
}
