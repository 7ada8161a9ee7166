package produce

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/topology"
)

// metrics are one producer's counters, on the Registerer it was given. Two
// producers given one Registerer share its counters (the second registration
// finds the first's); producers given different Registerers count apart.
type metrics struct {
	records, errors, rejectedKeys, hotKeys *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	for _, c := range []struct {
		into *(*prometheus.CounterVec)
		vec  *prometheus.CounterVec
	}{
		{&m.records, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencestream_producer_records_total",
			Help: "Records the broker acknowledged, by topic.",
		}, []string{"topic"})},
		{&m.errors, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencestream_producer_errors_total",
			Help: "Records the client failed to deliver, by topic.",
		}, []string{"topic"})},
		{&m.rejectedKeys, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencestream_producer_rejected_keys_total",
			Help: "Records refused before sending because of their key, by topic and reason (empty, invalid_utf8, too_long).",
		}, []string{"topic", "reason"})},
		{&m.hotKeys, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencestream_hot_keys_total",
			Help: "Hot-key decisions, by topic and decision (salted: split, per-key order lost; reported: order kept).",
		}, []string{"topic", "decision"})},
	} {
		vec, err := register(reg, c.vec)
		if err != nil {
			return nil, err
		}
		*c.into = vec
	}
	return m, nil
}

// register registers vec on reg, or returns the counter an earlier producer
// registered there under the same name.
func register(reg prometheus.Registerer, vec *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(vec)
	if err == nil {
		return vec, nil
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return nil, err
	}
	existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
	if !ok {
		return nil, fmt.Errorf("%w (the registered collector is a %T)", err, are.ExistingCollector)
	}
	return existing, nil
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
