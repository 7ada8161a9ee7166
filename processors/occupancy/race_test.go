//go:build race

package occupancy_test

// raceEnabled shrinks the big-fence tests, which the race detector slows ten-fold.
const raceEnabled = true
