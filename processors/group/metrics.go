package group

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics shared by every group. They are created unregistered and
// registered on the Registerer a processor is built with (default
// prometheus.DefaultRegisterer, which the binaries serve on /metrics).
var (
	recordsProcessed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_records_processed_total",
		Help: "Records handed to a group's callbacks, per input topic and partition (the per-partition counts give skew).",
	}, []string{"group", "topic", "partition"})
	deadLetters = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_deadletters_total",
		Help: "Records routed to the dead-letter topic, by reason.",
	}, []string{"group", "topic", "reason"})
	hlcStale = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_hlc_stale_total",
		Help: "New records whose HLC did not increase for their key, dead-lettered (stale: lower; duplicate: the same HLC as the last applied, different bytes).",
	}, []string{"group", "topic", "kind"})
	replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_replayed_inputs_total",
		Help: "Inputs already applied to their key's state, not applied again, by result: re-emitted (a redelivery whose recorded outputs were produced again), no-outputs (a redelivery that had none), beyond-window (a redelivery older than what the envelope remembers, after a reset of the group's offsets or more inputs between two commits than the replay window; its effect is in the state, its outputs are not re-emitted) — a copy of the last applied record at a new offset (the same HLC and bytes) counts as its redelivery.",
	}, []string{"group", "topic", "result"})
	handlerPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_handler_panics_total",
		Help: "Handler calls that panicked; each input was dead-lettered (reason panic) and its state changes dropped.",
	}, []string{"group", "topic"})
	stateDamaged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_state_damaged_total",
		Help: "Local tables found damaged (unreadable, missing files), moved aside as <table>.damaged-<time> and rebuilt from their changelog.",
	}, []string{"group"})
	processorRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_processor_restarts_total",
		Help: "Times a group's Goka processor stopped on an error retrying can fix (brokers unreachable, a damaged table) and was rebuilt.",
	}, []string{"group"})
	stateUndecodable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_state_undecodable_total",
		Help: "Group-table values that could not be decoded and were reset.",
	}, []string{"group"})
)

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }

// Dead-letter reasons (the "reason" header and metric label).
const (
	ReasonBadKey       = "bad-key"
	ReasonUndecodable  = "undecodable"
	ReasonEmptyValue   = "empty-value"
	ReasonInvalid      = "invalid"
	ReasonBadEmitKey   = "bad-output-key"
	ReasonStale        = "stale"
	ReasonDuplicateHLC = "duplicate-hlc"
	ReasonFutureHLC    = "future-hlc"
	// ReasonPanic: the handler panicked (the stack is in the log).
	ReasonPanic = "panic"
	// ReasonMisusedHandle: the handler used a zero handle or another group's.
	ReasonMisusedHandle = "misused-handle"
	// ReasonUndeclaredRekey: the handler wrote to a topic of another key
	// than its input's, and the topology declares no Boundary for that flow.
	ReasonUndeclaredRekey = "undeclared-rekey"
)

// collectors are every metric the kit exports.
func collectors() []prometheus.Collector {
	return []prometheus.Collector{recordsProcessed, deadLetters, hlcStale, replays, stateUndecodable, handlerPanics, stateDamaged, processorRestarts,
		partitionRecords, topicSkew, topicSkewAlert, recovery}
}

// RegisterMetrics registers the kit's metrics on reg. Registering them again
// on the same registerer is harmless; Processor and RunSkewReporter call it.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range collectors() {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			return fmt.Errorf("registering the kit's metrics: %w", err)
		}
	}
	return nil
}
