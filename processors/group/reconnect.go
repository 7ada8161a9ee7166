package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/processors/group/retry"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/dirlock"
)

// Restart defaults: a processor whose Goka processor stops on an error that
// retrying can fix (brokers unreachable, a connection reset, a damaged local
// table that the next open moves aside) is rebuilt and run again after
// DefaultRestartMin, doubling up to DefaultRestartMax; a run that lasted
// DefaultRestartReset starts the doubling over. Below this loop, sarama
// retries metadata 3 times 100 ms apart (cluster.Config.Sarama) and dials
// with its 30 s timeout; the loop is what outlasts a broker that is gone for
// longer.
const (
	DefaultRestartMin   = 250 * time.Millisecond
	DefaultRestartMax   = 5 * time.Second
	DefaultRestartReset = 30 * time.Second
)

type retryConfig struct{ min, max, reset time.Duration }

func (r retryConfig) validate() error {
	if r.min <= 0 || r.max < r.min {
		return fmt.Errorf("restart backoff must be positive and first <= longest, got %s, %s", r.min, r.max)
	}
	return nil
}

// ErrPermanent is wrapped by Run's error when the processor stopped on an
// error that retrying cannot fix (a topology or state mismatch, a locked or
// unwritable state directory, refused credentials).
var ErrPermanent = errors.New("stopped on an error retrying cannot fix")

// health is what Ready reports and what WaitForReadyContext waits on across
// restarts.
type health struct {
	mu      sync.Mutex
	changed chan struct{} // closed when the Goka processor is replaced
	ended   chan struct{} // closed when Run returns
	end     error
	last    error         // why the last Goka processor stopped (nil: it has not)
	fatal   error         // a storage error that ends the process
	fatalc  chan struct{} // closed when fatal is set
}

func newHealth() *health {
	return &health{changed: make(chan struct{}), ended: make(chan struct{}), fatalc: make(chan struct{})}
}

func (h *health) current(p *Processor) (*goka.Processor, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return p.gp(), h.changed
}

func (h *health) swap(p *Processor, np *goka.Processor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.cur.Store(np)
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *health) stopped(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = err
}

func (h *health) setFatal(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fatal == nil {
		h.fatal = err
		close(h.fatalc)
	}
}

func (p *Processor) fatalErr() error {
	p.health.mu.Lock()
	defer p.health.mu.Unlock()
	return p.health.fatal
}

func (h *health) finish(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end = err
	select {
	case <-h.ended:
	default:
		close(h.ended)
	}
}

func (h *health) endErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.end
}

// Ready is nil when every partition this instance owns is processing, else
// why not: a storage failure, a restart after an error (brokers unreachable:
// the error says which), recovery or a rebalance under way, or a stop.
func (p *Processor) Ready() error {
	h := p.health
	h.mu.Lock()
	fatal, last, end := h.fatal, h.last, h.end
	h.mu.Unlock()
	select {
	case <-h.ended:
		if end != nil { // the reason outlives Run: a stop on a changed topic says which
			return fmt.Errorf("group %s: stopped: %w", p.name, end)
		}
		return fmt.Errorf("group %s: stopped", p.name)
	default:
	}
	if fatal != nil {
		return fmt.Errorf("group %s: %w", p.name, fatal)
	}
	if p.gp().Recovered() {
		return nil
	}
	if last != nil {
		return fmt.Errorf("group %s: restarting after: %v", p.name, last)
	}
	return fmt.Errorf("group %s: recovering its tables or rebalancing", p.name)
}

// permanent returns err wrapped in ErrPermanent when retrying cannot fix it,
// else nil. Goka formats many errors with %v, so besides errors.Is the
// messages of the known permanent causes are matched.
func (p *Processor) permanent(err error) error {
	p.health.mu.Lock()
	fatal := p.health.fatal
	p.health.mu.Unlock()
	if fatal != nil {
		return fmt.Errorf("%w: %w", ErrPermanent, fatal)
	}
	if strings.Contains(err.Error(), "our cache has one") {
		return fmt.Errorf("%w: %w: %v: the local state is ahead of the broker (was the broker's data wiped?); stop the processor and delete its state directory, it is rebuilt from the changelog", ErrPermanent, statestore.ErrStateMismatch, err)
	}
	for _, target := range []error{statestore.ErrStateMismatch, topology.ErrMismatch, dirlock.ErrLocked, statestore.ErrUnwritable,
		sarama.ErrSASLAuthenticationFailed, sarama.ErrUnsupportedSASLMechanism, sarama.ErrIllegalSASLState,
		sarama.ErrTopicAuthorizationFailed, sarama.ErrGroupAuthorizationFailed, sarama.ErrClusterAuthorizationFailed} {
		if errors.Is(err, target) || strings.Contains(err.Error(), target.Error()) {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
	}
	if strings.Contains(err.Error(), "keys would live on different partition numbers") {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return nil
}

// runGoka runs the current Goka processor and, after an error retrying can
// fix, a fresh one, until ctx ends (nil) or an error is permanent.
func (p *Processor) runGoka(ctx, gokaCtx context.Context) error {
	wait := retry.Backoff{First: p.retry.min, Max: p.retry.max}
	for {
		started := time.Now()
		err := p.runBounded(ctx, gokaCtx, p.gp())
		// The store's failure first: a stop asked for after it (SIGTERM) is
		// still not a clean stop.
		if fatal := p.fatalErr(); fatal != nil { // the store stopped Goka (Stop: Run may return nil)
			if errors.Is(err, ErrStopTimeout) {
				return fmt.Errorf("%w: %w (%w)", ErrPermanent, fatal, err)
			}
			return fmt.Errorf("%w: %w", ErrPermanent, fatal)
		}
		if errors.Is(err, ErrStopTimeout) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return nil // Goka stopped cleanly by itself (Stop)
		}
		if perr := p.permanent(err); perr != nil {
			return perr
		}
		if time.Since(started) >= p.retry.reset {
			wait.Reset()
		}
		p.health.stopped(err)
		p.restarts().Inc()
		for {
			in := wait.Next()
			p.logRestart(err, in)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(in):
			}
			np, berr := p.build()
			if berr == nil {
				p.health.swap(p, np)
				break
			}
			if perr := p.permanent(berr); perr != nil {
				return perr
			}
			err = berr
		}
	}
}

func (p *Processor) restarts() interface{ Inc() } {
	return p.m.processorRestarts.WithLabelValues(p.name)
}
