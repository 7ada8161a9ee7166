package group

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/collector"
)

// metrics are the kit's counters of one processor, registered on the
// Registerer it was built with (Registerer; default
// prometheus.DefaultRegisterer, which the binaries serve on /metrics). The
// package holds none: two processors on two registries each count only
// their own records. Two processors on one registry share its collectors
// (collector.Register reuses what is already there), their series told apart by the
// group label.
type metrics struct {
	recordsProcessed, deadLetters, hlcStale, replays, handlerPanics,
	stateDamaged, processorRestarts, stateUndecodable,
	timersFired, timerErrors, timerTicks, lateRecords, windowWaits,
	deadLettersCut, unchanged *prometheus.CounterVec
	recovery *recoveryCollector
	// versionedRecords: versioned tables' dropped puts and unanswerable reads
	// (processors/group/versioned, through Operator.CountVersioned).
	versionedRecords *prometheus.CounterVec
	// processed holds recordsProcessed's series by input (processedKey), so
	// a record does not pay for the label lookup.
	processed sync.Map
}

type processedKey struct {
	group, topic string
	partition    int32
}

// recordProcessed counts one record of topic and partition handed to
// group's callbacks.
func (m *metrics) recordProcessed(group, topic string, partition int32) {
	k := processedKey{group, topic, partition}
	if c, ok := m.processed.Load(k); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := m.recordsProcessed.WithLabelValues(group, topic, partitionLabel(partition))
	m.processed.Store(k, c)
	c.Inc()
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// newMetrics creates the kit's metrics and registers them on reg (nil: not
// registered, as for Graph's throwaway build).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		recordsProcessed: counterVec("fencestream_records_processed_total",
			"Records handed to a group's callbacks, per input topic and partition (the per-partition counts give skew).",
			"group", "topic", "partition"),
		deadLetters: counterVec("fencestream_deadletters_total",
			"Records routed to the dead-letter topic, by reason.", "group", "topic", "reason"),
		hlcStale: counterVec("fencestream_hlc_stale_total",
			"New records whose HLC did not increase for their key, dead-lettered (stale: lower; duplicate: the same HLC as the last applied, different bytes).",
			"group", "topic", "kind"),
		replays: counterVec("fencestream_replayed_inputs_total",
			"Inputs already applied to their key's state, not applied again, by result: re-emitted (a redelivery whose recorded outputs were produced again), no-outputs (a redelivery that had none), beyond-window (a redelivery older than what the envelope remembers, after a reset of the group's offsets; its effect is in the state, its outputs are not re-emitted) — a copy of the last applied record at a new offset (the same HLC and bytes) counts as its redelivery.",
			"group", "topic", "result"),
		handlerPanics: counterVec("fencestream_handler_panics_total",
			"Handler calls that panicked; each input was dead-lettered (reason panic) and its state changes dropped.",
			"group", "topic"),
		stateDamaged: counterVec("fencestream_state_damaged_total",
			"Local tables found damaged (unreadable, missing files), moved aside as <table>.damaged-<time> and rebuilt from their changelog.",
			"group"),
		processorRestarts: counterVec("fencestream_processor_restarts_total",
			"Times a group's Goka processor stopped on an error retrying can fix (brokers unreachable, a damaged table) and was rebuilt.",
			"group"),
		stateUndecodable: counterVec("fencestream_state_undecodable_total",
			"Group-table values that could not be decoded and were reset.", "group"),
		timersFired: counterVec("fencestream_timers_fired_total",
			"Timers fired, by clock (stream or wall).", "group", "kind"),
		timerErrors: counterVec("fencestream_timer_errors_total",
			"Timer handlers that returned an error (the timer is consumed; the error is logged).", "group"),
		timerTicks: counterVec("fencestream_timer_ticks_sent_total",
			"Ticks sent to a group's timer topic for keys with due timers.", "group"),
		lateRecords: counterVec("fencestream_window_late_records_total",
			"Records that fell only into windows already closed (end plus grace passed in stream time); dropped from the aggregate.",
			"group", "windows"),
		unchanged: counterVec("fencestream_unchanged_writes_skipped_total",
			"Inputs whose handler set the state it found (byte for byte), emitted nothing and changed no timer: nothing was written to the table or its changelog (emit on change).",
			"group", "topic"),
		windowWaits: counterVec("fencestream_replay_window_waits_total",
			"Times an input waited before being applied, its key having ReplayWindow inputs on its partition that the group had not committed yet (commits stalled, as in a broker outage, or one key hotter than the window per commit); one per wait.",
			"group", "topic"),
		deadLettersCut: counterVec("fencestream_deadletters_cut_total",
			"Dead letters too large to send whole, by result: cut-down (sent with bounded prefixes of key and value and their sizes, header fencestream-cut-down), dropped (refused even cut down; logged). Each is also counted once in fencestream_deadletters_total.",
			"group", "result"),
		recovery: newRecoveryCollector(),
	}
	m.versionedRecords = counterVec("fencestream_versioned_records_total",
		"Versioned tables: puts and deletes dropped as older than the history kept (result expired), versions dropped by the bound on versions per key within retention (evicted), and as-of reads older than the history kept, answered with no value (beyond-history).",
		"group", "table", "result")
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []**prometheus.CounterVec{&m.recordsProcessed, &m.deadLetters, &m.hlcStale, &m.replays, &m.handlerPanics,
		&m.stateDamaged, &m.processorRestarts, &m.stateUndecodable, &m.timersFired, &m.timerErrors, &m.timerTicks, &m.lateRecords, &m.windowWaits, &m.deadLettersCut, &m.unchanged} {
		var err error
		*c, err = collector.Register(reg, *c)
		errs = append(errs, err)
	}
	var err error
	m.recovery, err = collector.Register(reg, m.recovery)
	errs = append(errs, err)
	m.versionedRecords, err = collector.Register(reg, m.versionedRecords)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("registering the kit's metrics: %w", err)
	}
	return m, nil
}

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }
