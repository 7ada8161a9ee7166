// Package collector is metric registration shared by the kit and the
// applications: Register puts a Prometheus collector on the Registerer it is
// given, or hands back the one of the same description already there.
//
// Invariant: nothing is registered on a process-wide registry the caller did
// not pass, and two processors sharing a Registerer share a collector's
// series (told apart by their labels) instead of failing. It is a leaf: it
// imports nothing of the kit.
package collector
