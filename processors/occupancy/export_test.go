package occupancy

// PeekForward exposes peekForward to the external tests and benchmarks.
var PeekForward = peekForward
