package deadletter

// Dead-letter record headers.
const (
	HeaderReason          = "fencestream-reason"
	HeaderError           = "fencestream-error"
	HeaderSourceTopic     = "fencestream-source-topic"
	HeaderSourcePartition = "fencestream-source-partition"
	HeaderSourceOffset    = "fencestream-source-offset"
	HeaderGroup           = "fencestream-group"
)

// A record that cannot be dead-lettered whole is dead-lettered cut down
// (DESIGN rule 19): its key and value are replaced by bounded prefixes, and
// these headers say so and give the original sizes; the reason, error and
// source headers (topic, partition, offset, group) are kept. A dead letter
// must never fail for its size: a failed send stops the processor, and the
// restarted one meets the same record again, forever.
const (
	// HeaderCutDown is "true" on a dead letter cut down to fit.
	HeaderCutDown = "fencestream-cut-down"
	// HeaderKeyBytes and HeaderValueBytes are the sizes of the input's key
	// and value, in bytes, on a cut-down dead letter.
	HeaderKeyBytes   = "fencestream-key-bytes"
	HeaderValueBytes = "fencestream-value-bytes"
)

// Bounds of a cut-down dead letter and of what every dead letter carries.
const (
	// CutKeyBytes and CutValueBytes bound the key and value prefixes of a
	// cut-down dead letter: enough to recognise the record and find its
	// producer; the source headers say where the whole of it is.
	CutKeyBytes   = 1 << 10
	CutValueBytes = 4 << 10
)

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

// Dead-letter reasons of unusable input keys. A null key (the record has none:
// a producer that set no key) and an empty one (a key of zero bytes) are
// different producer bugs, so they get different reasons; every other unusable
// key (invalid UTF-8, too long) is ReasonBadKey.
const (
	ReasonNullKey  = "null-key"
	ReasonEmptyKey = "empty-key"
)
