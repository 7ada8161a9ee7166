// Package hlc is a hybrid logical clock: a 64-bit timestamp whose upper 48 bits
// are wall-clock milliseconds and lower 16 bits a logical counter.
//
// Invariant: every value a Clock returns is strictly greater than every value it
// returned before and than every value it has observed, even when the wall clock
// goes backwards, up to the largest timestamp, where it saturates instead of
// wrapping to 0. Consumers use this to assert per-device monotonicity: under
// device_id partitioning a device's HLC never decreases, so a decrease means a
// re-key upstream or a replay.
package hlc
