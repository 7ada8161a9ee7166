package delivery

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Opt changes the delivery processor's settings.
type Opt func(*config)

type config struct {
	attemptTimeout      time.Duration
	attemptWait         time.Duration
	maxAttempts         int
	maxAge              time.Duration
	backoffBase         time.Duration
	backoffMax          time.Duration
	maxPending          int
	endpointConcurrency int
	breakerFailures     int
	breakerCooldown     time.Duration
	capDelay            time.Duration
	now                 func() time.Time
	client              *http.Client
	subs                *Subscriptions
}

// Defaults (see each option).
const (
	DefaultAttemptTimeout      = 2 * time.Second
	DefaultAttemptWait         = 100 * time.Millisecond
	DefaultMaxAttempts         = 12
	DefaultMaxAge              = 24 * time.Hour
	DefaultBackoff             = time.Second
	DefaultBackoffMax          = 10 * time.Minute
	DefaultMaxPending          = 256
	DefaultEndpointConcurrency = 16
	DefaultBreakerFailures     = 3
	DefaultBreakerCooldown     = 15 * time.Second
)

func defaultConfig() config {
	return config{
		attemptTimeout: DefaultAttemptTimeout, attemptWait: DefaultAttemptWait, maxAttempts: DefaultMaxAttempts, maxAge: DefaultMaxAge,
		backoffBase: DefaultBackoff, backoffMax: DefaultBackoffMax, maxPending: DefaultMaxPending,
		endpointConcurrency: DefaultEndpointConcurrency, breakerFailures: DefaultBreakerFailures,
		breakerCooldown: DefaultBreakerCooldown, capDelay: 200 * time.Millisecond, now: time.Now,
	}
}

// WithAttemptTimeout bounds one HTTP request (default 2 s).
func WithAttemptTimeout(d time.Duration) Opt { return func(c *config) { c.attemptTimeout = d } }

// WithAttemptWait is how long a handler call waits for an attempt's answer
// (default 100 ms). An attempt still running then goes on in the
// background and the device's timer applies its answer about this long
// later, so a slow endpoint holds no partition; a crash loses the answer
// and the trigger is sent again (at least once).
func WithAttemptWait(d time.Duration) Opt { return func(c *config) { c.attemptWait = d } }

// WithMaxAttempts is how many failed attempts dead-letter a trigger
// (default 12).
func WithMaxAttempts(n int) Opt { return func(c *config) { c.maxAttempts = n } }

// WithMaxAge is how long after its first attempt (wall clock) a trigger
// still undelivered is dead-lettered (default 24 h).
func WithMaxAge(d time.Duration) Opt { return func(c *config) { c.maxAge = d } }

// WithBackoff sets the first retry delay and its ceiling (defaults 1 s and
// 10 min): the delay doubles per failed attempt, with jitter, and is never
// below the endpoint's Retry-After.
func WithBackoff(base, ceiling time.Duration) Opt {
	return func(c *config) { c.backoffBase, c.backoffMax = base, ceiling }
}

// WithMaxPending bounds the triggers a device may have queued, over all its
// subscriptions (default 256); one more is dead-lettered (queue-full).
func WithMaxPending(n int) Opt { return func(c *config) { c.maxPending = n } }

// WithEndpointConcurrency caps the requests in flight to one endpoint
// (origin) from this process (default 16); an attempt over the cap is
// scheduled 0.2-0.4 s later, not waited for.
func WithEndpointConcurrency(n int) Opt { return func(c *config) { c.endpointConcurrency = n } }

// WithBreaker sets how many consecutive failures (timeouts, connection
// errors, 429, 5xx) open an endpoint's breaker and how long it stays open
// before one probe is let through (defaults 3 and 15 s).
func WithBreaker(failures int, cooldown time.Duration) Opt {
	return func(c *config) { c.breakerFailures, c.breakerCooldown = failures, cooldown }
}

// WithClock replaces the wall clock (default time.Now): it decides when
// attempts are due and stamps outcome observations.
func WithClock(now func() time.Time) Opt { return func(c *config) { c.now = now } }

// WithHTTPClient replaces the HTTP client (default: a client of its own;
// redirects are never followed either way).
func WithHTTPClient(h *http.Client) Opt { return func(c *config) { c.client = h } }

// WithSubscriptions makes the processor use subs instead of following the
// subscriptions topic itself (tests, or a binary that shares one).
func WithSubscriptions(subs *Subscriptions) Opt { return func(c *config) { c.subs = subs } }

func (c *config) validate() error {
	var errs []error
	positive := func(name string, ok bool, v any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", name, v))
		}
	}
	positive("attempt timeout", c.attemptTimeout > 0, c.attemptTimeout)
	positive("attempt wait", c.attemptWait > 0, c.attemptWait)
	positive("max attempts", c.maxAttempts > 0, c.maxAttempts)
	positive("max age", c.maxAge > 0, c.maxAge)
	positive("backoff", c.backoffBase > 0, c.backoffBase)
	positive("max pending", c.maxPending > 0, c.maxPending)
	positive("endpoint concurrency", c.endpointConcurrency > 0, c.endpointConcurrency)
	positive("breaker failures", c.breakerFailures > 0, c.breakerFailures)
	positive("breaker cooldown", c.breakerCooldown > 0, c.breakerCooldown)
	if c.backoffMax < c.backoffBase {
		errs = append(errs, fmt.Errorf("backoff ceiling %s is below the first delay %s", c.backoffMax, c.backoffBase))
	}
	if c.now == nil {
		errs = append(errs, errors.New("clock is nil"))
	}
	return errors.Join(errs...)
}
