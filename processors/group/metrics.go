package group

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics shared by every group; binaries serve the default registry on /metrics.
var (
	recordsProcessed = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_records_processed_total",
		Help: "Records handed to a group's callbacks, per input topic and partition (the per-partition counts give skew).",
	}, []string{"group", "topic", "partition"})
	deadLetters = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_deadletters_total",
		Help: "Records routed to the dead-letter topic, by reason.",
	}, []string{"group", "topic", "reason"})
	hlcStale = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_hlc_stale_total",
		Help: "Records whose HLC did not increase for their key (decrease: out of order; duplicate: same HLC); not applied.",
	}, []string{"group", "topic", "kind"})
	replays = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_replayed_inputs_total",
		Help: "Inputs already applied to their key's state (a redelivery after a crash or takeover, or an exact replay), by result: re-emitted (its recorded outputs were produced again), no-outputs (it had none), beyond-window (too old to replay; its effect is in the state).",
	}, []string{"group", "topic", "result"})
	stateUndecodable = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "fencestream_state_undecodable_total",
		Help: "Group-table values that could not be decoded and were reset.",
	}, []string{"group"})
)

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }

// Dead-letter reasons (the "reason" header and metric label).
const (
	ReasonBadKey      = "bad-key"
	ReasonUndecodable = "undecodable"
	ReasonEmptyValue  = "empty-value"
	ReasonInvalid     = "invalid"
	ReasonBadEmitKey  = "bad-output-key"
	ReasonStale       = "stale"
	ReasonFutureHLC   = "future-hlc"
)
