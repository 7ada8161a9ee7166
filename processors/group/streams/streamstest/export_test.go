package streamstest

import "testing"

// Rebind is d reporting to t (a test of the driver's own failures).
func Rebind(d *Driver, t testing.TB) *Driver {
	c := *d
	c.t = t
	return &c
}
