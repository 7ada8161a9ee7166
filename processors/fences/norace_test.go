//go:build !race

package fences

const raceEnabled = false
