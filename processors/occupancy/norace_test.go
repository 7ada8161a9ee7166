//go:build !race

package occupancy_test

const raceEnabled = false
