//go:build !race

package windows_test

const raceOn = false
