package view

// Connected reports whether the view is connected to the brokers: false while
// Goka reconnects a partition (WithViewAutoReconnect) after the brokers went
// away. A view that recovered once still serves its last copy meanwhile;
// readiness checks use this to say the copy is not being kept up to date.
func (v *View[M, PM]) Connected() bool {
	ok := true
	_ = v.read(func() error { ok = v.b.Connected(); return nil })
	return ok
}
