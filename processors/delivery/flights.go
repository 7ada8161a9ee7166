package delivery

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
)

// flightKey names one attempt: a device's queue head for one subscription.
type flightKey struct{ device, sub, trigger string }

// flight is an attempt that may outlive the handler call that started it.
type flight struct {
	done     chan struct{}
	r        result    // set before done closes
	finished time.Time // under flights.mu
}

// flights holds the attempts still running, or answered and not yet picked
// up, of this process: a handler waits for an attempt at most
// AttemptWait, and the device's retry timer picks up its result later
// in the key's own callback (so a slow endpoint holds no partition). They
// are memory only: after a crash the result is lost and the trigger is sent
// again (at least once, same Idempotency-Key). The endpoints' concurrency
// caps bound the requests running; a result whose key moved to another
// instance (or whose queue was dropped) is never picked up, and is swept.
type flights struct {
	mu    sync.Mutex
	m     map[flightKey]*flight
	swept time.Time
}

// flightTTL is how long an answered attempt waits to be picked up before it
// is dropped (its trigger is then sent again).
const flightTTL = time.Minute

func newFlights() *flights { return &flights{m: map[flightKey]*flight{}} }

// get returns the attempt of k, nil if none.
func (fs *flights) get(k flightKey) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[k]
}

// take removes the attempt of k once its result is applied.
func (fs *flights) take(k flightKey) {
	fs.mu.Lock()
	delete(fs.m, k)
	fs.mu.Unlock()
}

// start runs one attempt of tr to sub in the background. ctx is the
// partition's: losing the partition cancels the request (not an attempt).
func (fs *flights) start(ctx context.Context, s *sender, k flightKey, sub *deliverypb.Subscription, tr *geofencepb.Trigger) *flight {
	f := &flight{done: make(chan struct{})}
	tr = proto.Clone(tr).(*geofencepb.Trigger) // the state's copy stays the handler's
	now := time.Now()
	fs.mu.Lock()
	if now.Sub(fs.swept) >= flightTTL/4 {
		fs.swept = now
		for key, o := range fs.m {
			if !o.finished.IsZero() && now.Sub(o.finished) >= flightTTL {
				delete(fs.m, key)
			}
		}
	}
	fs.m[k] = f
	fs.mu.Unlock()
	go func() {
		f.r = s.attempt(ctx, sub, tr)
		fs.mu.Lock()
		f.finished = time.Now()
		fs.mu.Unlock()
		close(f.done)
	}()
	return f
}

// answered reports whether f has its result.
func (f *flight) answered() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
