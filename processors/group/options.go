package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/statestore"
)

// Opt configures how a group's processor is built.
type Opt func(*runConfig)

type runConfig struct {
	stateDir     string
	hotStandby   bool
	recoverAhead bool
	tester       *tester.Tester
	noCreate     bool
	extra        []goka.ProcessorOption
	window       int
	maxSkew      time.Duration
	now          func() time.Time
	onReady      func(*Processor)
	registerer   prometheus.Registerer
	maxTimers    int
	timerEvery   time.Duration
	timerBatch   int
	idle         time.Duration
	storage      statestore.Kind // see storage.go
	flush        time.Duration
	flushSet     bool
	committed    func(topic string, partition int32) (int64, bool)
	retry        retryConfig // see reconnect.go
}

// Registerer sets where the kit's metrics are registered (default
// prometheus.DefaultRegisterer).
func Registerer(reg prometheus.Registerer) Opt { return func(c *runConfig) { c.registerer = reg } }

// DefaultMaxSkew is how far ahead of the wall clock an input's HLC may be
// before it is dead-lettered as future-hlc, by default. Devices' clocks drift by
// seconds; minutes ahead means a broken clock, and applying it would freeze the
// key (every later input would look stale).
const DefaultMaxSkew = 5 * time.Minute

// ReplayWindow caps how many inputs per key and input partition the kit
// remembers with their outputs (default DefaultReplayWindow). It remembers
// only those at or above the committed offset; the cap matters when a key has
// more inputs than this between two commits, or the committed offsets are
// unknown. A larger window re-emits more of such a burst at the cost of a
// larger table value.
func ReplayWindow(n int) Opt { return func(c *runConfig) { c.window = n } }

// MaxClockSkew sets how far ahead of the wall clock an ordered input's HLC may
// be (default DefaultMaxSkew).
func MaxClockSkew(d time.Duration) Opt { return func(c *runConfig) { c.maxSkew = d } }

// Clock sets the wall clock the future-HLC check reads (default time.Now).
// What a handler writes never depends on it.
func Clock(now func() time.Time) Opt { return func(c *runConfig) { c.now = now } }

// StateDir is where the group keeps its LevelDB tables (required, except with
// Tester). Goka's default, a path under the OS temp dir, is never used: state
// must be tied to the broker it was built from.
func StateDir(dir string) Opt { return func(c *runConfig) { c.stateDir = dir } }

// HotStandby keeps warm copies of the tables of partitions this instance does not
// own, so taking one over after a rebalance needs no full recovery (default off).
func HotStandby(on bool) Opt { return func(c *runConfig) { c.hotStandby = on } }

// RecoverAhead recovers the tables of newly assigned partitions before the
// rebalance completes (default off).
func RecoverAhead(on bool) Opt { return func(c *runConfig) { c.recoverAhead = on } }

// Tester runs the group against Goka's in-memory tester instead of a broker
// (default: a broker); the topology check and state directory are skipped.
func Tester(tt *tester.Tester) Opt { return func(c *runConfig) { c.tester = tt } }

// NoCreateTopics makes start-up only check the topology against the broker
// instead of creating missing topics (default: create missing, refuse mismatches).
func NoCreateTopics() Opt { return func(c *runConfig) { c.noCreate = true } }

// GokaOptions appends raw Goka options (for tests and advanced use); they cannot
// replace the hasher, which is always the pinned one.
func GokaOptions(opts ...goka.ProcessorOption) Opt {
	return func(c *runConfig) { c.extra = append(c.extra, opts...) }
}

func (c *runConfig) validate() error {
	if c.tester == nil && c.stateDir == "" {
		return errors.New("a state directory is required")
	}
	if err := c.retry.validate(); err != nil {
		return err
	}
	if c.window < 1 {
		return fmt.Errorf("replay window must be at least 1, got %d", c.window)
	}
	if c.maxTimers < 1 {
		return fmt.Errorf("maximum timers per key must be at least 1, got %d", c.maxTimers)
	}
	if c.timerEvery <= 0 {
		return fmt.Errorf("timer interval must be positive, got %s", c.timerEvery)
	}
	if c.timerBatch < 1 {
		return fmt.Errorf("timer batch must be at least 1, got %d", c.timerBatch)
	}
	if c.idle < 0 {
		return fmt.Errorf("idle stream time must not be negative, got %s", c.idle)
	}
	if c.maxSkew <= 0 {
		return fmt.Errorf("maximum clock skew must be positive, got %s", c.maxSkew)
	}
	return nil
}
