package group

import "time"

// SetStopWait shortens how long p's Run waits for Goka to stop.
func SetStopWait(p *Processor, d time.Duration) { p.stopWait = d }
