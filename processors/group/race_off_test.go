//go:build !race

package group_test

const raceOn = false
