// Package fleet is fencestream's seeded fleet simulator: it feeds the system
// with GPS pings (tests, benchmarks, the all-in-one runner, `fencectl sim`)
// and scores it against the ground truth of the noise-free trajectories.
//
// # Invariants
//
//   - Reproducible. Everything is drawn from math/rand/v2 PCG generators
//     seeded from (Config.Seed, purpose, device index), never the global
//     source: the same Seed, Config and fences give identical pings and
//     truth, whatever GOMAXPROCS. Pings and Stream redraw the noise from
//     the seed on every call, so they agree with each other and themselves.
//   - Order. Pings come tick by tick in event time; within a tick in
//     [Sim.Devices] order (moving "veh-0001"…, then parked "park-0001"…).
//     Each device's DeviceTimeMs (and HLC, with StampHLC) strictly increases.
//   - Truth is decidable. Every true transition is one that a debouncer
//     with hysteresis, min samples and min dwell can confirm and that GPS
//     noise cannot fake or hide (the rules below); routes that break a rule
//     are redrawn.
//
// # Routes
//
// A moving device starts at a point clearly outside every fence, within two
// kilometres of a random fence. It then drives straight legs (in a local
// equirectangular projection around its start) at SpeedMPS to waypoints:
// 80% are random points well inside a fence whose centre lies within 5 km,
// where it stops for MinGap to 2×MinGap; 20% are random points 0.5–3 km away
// outside every fence, where it stops for up to 20 s. Every waypoint is
// clear (see below) of every fence's edge band. Legs cross whatever fences
// lie between.
//
// With Duration 0 a route is a closed lap of Config.Lap: the device parks
// at its start for MinGap, drives forwards for at most half of the rest,
// waits, and drives the same legs backwards, so Stream can repeat laps
// forever without a jump.
//
// # Truth rules
//
// For each (device, fence) the noise-free position at each ping time is
// classified with d = Fence.SignedDistance:
//
//   - clearly inside: d ≥ AccuracyM + 3σ + 1 m (σ = NoiseSigmaM), so the
//     fix's accuracy circle is inside the fence despite noise;
//   - clearly outside: d ≤ −(max(hysteresis, AccuracyM) + 3σ + 1 m), where
//     hysteresis is the fence's own HysteresisM or Config.HysteresisM (the
//     debouncer's default 25 m): with σ = 5 that is 41 m;
//   - the band: anything between.
//
// A true transition is a change of containment (d ≥ 0) between consecutive
// samples. A route is accepted only if, for every fence:
//
//   - each passage through the band goes from one clear side to the other
//     with exactly one change of containment, and lasts at most 30 s: a
//     route that enters the band and comes back out on the side it came
//     from (grazing, whether or not it touched the edge), or that runs
//     along the edge, is redrawn;
//   - between two crossings the device is clearly on its side for at least
//     MinGap (measured from the first clear sample after one passage to the
//     first band sample of the next), and after its last crossing for at
//     least MinGap before the span ends; so consecutive transitions of one
//     (device, fence) are more than MinGap apart;
//   - the span does not end in the band.
//
// The first crossing needs no clear run before it: a device starts outside
// every fence, which is where a debouncer's state starts too. Routes are
// drawn leg by leg; a leg that breaks a rule is redrawn (up to 40 times),
// then the device stays put until the end; if that too breaks a rule the
// whole route is redrawn (up to 60 times, then New fails with ErrNoRoute).
// Transition times are the first sample on the new side, as event time.
//
// # Parked devices
//
// Parked devices stand still at a point whose true signed distance to the
// edge of a random fence is +ParkedOffsetM (even index, inside) or
// −ParkedOffsetM (odd index, outside), found on the middle half of a long
// enough edge (or anywhere on a circle) and refined to within 0.1 mm.
// FarParked of them (every k-th) use ParkedFarM instead. A parked device is
// clear of every other fence's band. Parked devices never appear in
// Truth.Transitions; the ones inside a fence are inside from the first
// ping, so a debouncer starting OUTSIDE may rightly ENTER them once (far
// ones always can, edge ones rarely).
//
// # Noise
//
// Each ping adds independent N(0, σ) metres east and north to the true
// position, converted to degrees at the point's latitude (111,320 m per
// degree, as the fences package). Speed and heading are the true ones
// (0 while stopped; heading keeps the last leg's).
//
// # Keying
//
// [Keying] names the partition-key strategies of the seed's ordering
// table and [MeasureMisordering] replays a trigger sequence through a
// simulated topic and consumer group to count per-device reordering and
// partition skew (see its doc for the model).
package fleet
