package group

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lovoo/goka"
)

// DefaultStopWait bounds how long Run waits for Goka's processor to stop once
// ctx ends or the state directory failed: a storage engine that hangs in its
// Close (Pebble after a failed write) must not keep a stopping process alive.
const DefaultStopWait = 10 * time.Second

// ErrStopTimeout is wrapped by Run's error when Goka's processor did not stop
// within DefaultStopWait; its goroutines are abandoned, and the process should
// exit.
var ErrStopTimeout = errors.New("processor did not stop in time")

// runBounded runs gp until it returns, or until DefaultStopWait after ctx
// ends or the state fails (whichever first), and then gives up on it.
func (p *Processor) runBounded(ctx, gokaCtx context.Context, gp *goka.Processor) error {
	done := make(chan error, 1)
	go func() { done <- gp.Run(gokaCtx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	case <-p.health.fatalc:
	}
	wait := p.stopWait
	if wait == 0 {
		wait = DefaultStopWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		p.log.Error("processor did not stop in time; abandoned", "after", wait)
		return fmt.Errorf("%w: still stopping %s after it was asked to", ErrStopTimeout, wait)
	}
}
