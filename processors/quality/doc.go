// Package quality scores trigger detectors against ground truth on seeded
// workloads: the debouncer's own rules (debounce.Apply under the sprt and
// strict detectors) side by side with the detectors people compare it with
// (raw point-in-polygon, N consecutive samples, N samples plus an exit
// hysteresis) and the all-fixes bound. `fencectl quality` prints its report.
//
// # Workloads
//
//   - Parked near an edge: each device stands still at a true signed distance
//     drawn uniformly from 0–MaxDistanceM inside or outside (alternating) an
//     edge of an octagonal fence (sides of 460 m; devices on the middle half
//     of a side) and reports Fixes fixes at 1 Hz with independent Gaussian
//     noise of σ metres per axis and a reported accuracy of ratio × σ. Truth
//     is the side of the true position (Fence.SignedDistance); a device
//     truly inside owes one ENTER (every detector starts OUTSIDE), a device
//     outside none.
//   - The moving fleet (processors/fleet) over the demo fences, with each
//     fence's own settings: every true crossing must be detected once.
//
// # Scores
//
// Per distance band and detector: final state correct (inside or not after
// the last fix), recall (inside devices that got an ENTER), false ENTERs
// (ENTER triggers of outside devices), flapping devices (more than one
// trigger; the truth allows at most one), devices with a second ENTER, and
// the delay from the first fix to the ENTER. The all-fixes bound classifies a
// device by the mean signed distance of all its fixes: what a detector that
// waits for every fix could know; it fires no triggers and has no delay.
//
// On the moving fleet, per (device, fence) and in time order, a detected
// trigger matches the latest true transition of its type that is at or
// before it (with 30 s of slack, for detectors that fire on a noisy fix
// before the truth) and after the last one matched; the rest are spurious,
// and unmatched true transitions are missed.
//
// # Scenarios (issue 20: real phones)
//
// [RunScenarios] runs each scenario's devices through every detector but the
// all-fixes bound, σ 5 m per axis throughout (sprt-v1 is the sprt detector
// before issue 20: α = β = 0.001, accuracy believed, no censoring):
//
//   - outliers, optimistic, outliers+optimistic: parked 0-10 m inside or
//     outside an octagon edge, 100 fixes at 1 Hz; 5% of fixes drawn with σ
//     60 m reporting the normal 5 m, and/or accuracy reported at 2.5 m.
//   - road: vehicles driving 2 km at 10-15 m/s on a straight road 3, 5 or
//     10 m outside the edge of a 3 km square, parallel to it: never inside.
//   - tunnel: vehicles driving straight through the square at 10-15 m/s with
//     one 30-120 s gap without fixes while inside: ENTER and EXIT owed.
//   - sparse-parked, sparse-moving: as parked and as tunnel (no gap), a fix
//     every 30 s.
//
// Per scenario and detector: final state correct; devices with a false
// ENTER (truly outside throughout) and with more than one ENTER, by distance
// band; missed transitions of the owed ones (a crossing's ENTER matches from
// 30 s before the true crossing to 30 s after the true exit); and the ENTER
// delay from the first fix (parked) or the true crossing (moving), p50/p90
// overall and p90 per band.
//
// Everything is deterministic for a Config: the same seed gives the same
// report on every machine.
package quality
