//go:build race

package windows_test

// raceOn: the race detector slows the tester runs ten times; the heaviest
// tests use smaller inputs under it.
const raceOn = true
