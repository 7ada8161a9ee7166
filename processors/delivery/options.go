package delivery

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Opt changes the delivery processor's settings; each overrides one default
// of defaultConfig, which its doc names.
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

// AttemptTimeout bounds one HTTP request (default 2 s).
func AttemptTimeout(d time.Duration) Opt { return func(c *config) { c.attemptTimeout = d } }

// AttemptWait is how long a handler call waits for an attempt's answer
// (default 100 ms). An attempt still running then goes on in the
// background and the device's timer applies its answer about this long
// later, so a slow endpoint holds no partition; a crash loses the answer
// and the trigger is sent again (at least once).
func AttemptWait(d time.Duration) Opt { return func(c *config) { c.attemptWait = d } }

// MaxAttempts is how many failed attempts dead-letter a trigger
// (default 12).
func MaxAttempts(n int) Opt { return func(c *config) { c.maxAttempts = n } }

// MaxAge is how long after its first attempt (wall clock) a trigger
// still undelivered is dead-lettered (default 24 h).
func MaxAge(d time.Duration) Opt { return func(c *config) { c.maxAge = d } }

// Backoff sets the first retry delay and its ceiling (defaults 1 s and
// 10 min): the delay doubles per failed attempt, with jitter, and is never
// below the endpoint's Retry-After.
func Backoff(base, ceiling time.Duration) Opt {
	return func(c *config) { c.backoffBase, c.backoffMax = base, ceiling }
}

// MaxPending bounds the triggers a device may have queued, over all its
// subscriptions (default 256); one more is dead-lettered (queue-full).
func MaxPending(n int) Opt { return func(c *config) { c.maxPending = n } }

// EndpointConcurrency caps the requests in flight to one endpoint
// (origin) from this process (default 16); an attempt over the cap is
// scheduled 0.2-0.4 s later, not waited for.
func EndpointConcurrency(n int) Opt { return func(c *config) { c.endpointConcurrency = n } }

// Breaker sets how many consecutive failures (timeouts, connection
// errors, 429, 5xx) open an endpoint's breaker and how long it stays open
// before one probe is let through (defaults 3 and 15 s).
func Breaker(failures int, cooldown time.Duration) Opt {
	return func(c *config) { c.breakerFailures, c.breakerCooldown = failures, cooldown }
}

// Now replaces the wall clock (default time.Now): it decides when
// attempts are due and stamps outcome observations.
func Now(now func() time.Time) Opt { return func(c *config) { c.now = now } }

// HTTPClient replaces the HTTP client (default: a client of its own;
// redirects are never followed either way).
func HTTPClient(h *http.Client) Opt { return func(c *config) { c.client = h } }

// SharedSubscriptions makes the processor use subs instead of following the
// subscriptions topic itself (tests, or a binary that shares one).
func SharedSubscriptions(subs *Subscriptions) Opt { return func(c *config) { c.subs = subs } }

// validate refuses options that cannot work, naming each.
func (c *config) validate() error {
	var errs []error
	positive := func(name string, ok bool, v any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %v", name, v))
		}
	}
	positive("AttemptTimeout", c.attemptTimeout > 0, c.attemptTimeout)
	positive("AttemptWait", c.attemptWait > 0, c.attemptWait)
	positive("MaxAttempts", c.maxAttempts > 0, c.maxAttempts)
	positive("MaxAge", c.maxAge > 0, c.maxAge)
	positive("Backoff", c.backoffBase > 0, c.backoffBase)
	positive("MaxPending", c.maxPending > 0, c.maxPending)
	positive("EndpointConcurrency", c.endpointConcurrency > 0, c.endpointConcurrency)
	positive("Breaker: failures", c.breakerFailures > 0, c.breakerFailures)
	positive("Breaker: cooldown", c.breakerCooldown > 0, c.breakerCooldown)
	if c.backoffMax < c.backoffBase {
		errs = append(errs, fmt.Errorf("Backoff: ceiling %s is below the first delay %s", c.backoffMax, c.backoffBase))
	}
	if c.now == nil {
		errs = append(errs, errors.New("Now: nil clock"))
	}
	return errors.Join(errs...)
}
