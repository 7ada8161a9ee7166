package group

import (
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// visitGuard keeps the timer driver's looks (Goka visits) out of rebalances.
// Goka aborts a visit whose partitions stop and then reads its count while
// the visits already handed to partitions still add to it: a data race inside
// Goka (Processor.VisitAllWithStats). Holding a rebalance's Cleanup until a
// look in progress has finished, and starting no look during it, keeps
// visits from being aborted.
type visitGuard struct {
	mu       sync.Mutex
	paused   int
	inflight int
}

// enter starts a look unless a rebalance is under way.
func (g *visitGuard) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused > 0 {
		return false
	}
	g.inflight++
	return true
}

func (g *visitGuard) leave() {
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

// pause stops new looks and waits up to grace for one in progress to end (a
// look waits on partitions that are still running, so it ends; the bound is
// for a partition that is not).
func (g *visitGuard) pause(grace time.Duration) {
	g.mu.Lock()
	g.paused++
	g.mu.Unlock()
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		n := g.inflight
		g.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond) // a rebalance is rare; polling keeps the guard simple
	}
}

func (g *visitGuard) resume() {
	g.mu.Lock()
	g.paused--
	g.mu.Unlock()
}

// guardedHandler is Goka's consumer-group handler with Cleanup (which stops
// the partitions at every rebalance) held until no look is in progress.
type guardedHandler struct {
	sarama.ConsumerGroupHandler
	guard *visitGuard
}

func (h guardedHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	h.guard.pause(shutdownVisitGrace)
	defer h.guard.resume()
	return h.ConsumerGroupHandler.Cleanup(s)
}
