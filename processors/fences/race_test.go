//go:build race

package fences

// raceEnabled skips the timing test, which the race detector slows ten-fold.
const raceEnabled = true
