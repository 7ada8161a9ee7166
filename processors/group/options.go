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

// Opt configures how a group's processor is built (Group.Processor). Every
// option overrides one default of defaultRunConfig, which its doc names; the
// options are checked together (runConfig.validate) before anything is
// built, and a bad one is refused with an error naming it.
type Opt func(*runConfig)

// runConfig is what Processor is built from; defaultRunConfig holds every
// default in one place.
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
	onReady      func(*Processor) // registry.go
	registerer   prometheus.Registerer
	maxTimers    int
	timerEvery   time.Duration
	timerBatch   int
	idle         time.Duration
	storage      statestore.Kind // see storage.go
	flush        time.Duration
	committed    func(topic string, partition int32) (int64, bool)
	retry        retryConfig   // see reconnect.go
	topicEvery   time.Duration // see topicwatch.go
	cache        cacheConfig   // see recordcache.go
}

// defaultRunConfig is the one place the processor's defaults are written.
func defaultRunConfig() runConfig {
	return runConfig{
		window:     DefaultReplayWindow,
		maxSkew:    DefaultMaxSkew,
		now:        time.Now,
		registerer: prometheus.DefaultRegisterer,
		maxTimers:  DefaultMaxTimers,
		timerEvery: DefaultTimerInterval,
		timerBatch: DefaultTimerBatch,
		storage:    statestore.Default,
		flush:      DefaultProducerFlush,
		retry:      retryConfig{min: DefaultRestartMin, max: DefaultRestartMax, reset: DefaultRestartReset},
		topicEvery: DefaultTopicCheck,
		cache:      cacheConfig{bytes: DefaultRecordCache, every: DefaultCommitInterval},
	}
}

// validate refuses options that cannot work, naming the option.
func (c *runConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.tester == nil && c.stateDir == "" {
		bad("StateDir: a state directory is required (except with Tester)")
	}
	if c.window < 1 {
		bad("ReplayWindow: must be at least 1, got %d", c.window)
	}
	if c.maxSkew <= 0 {
		bad("MaxClockSkew: must be positive, got %s", c.maxSkew)
	}
	if c.now == nil {
		bad("Clock: nil clock")
	}
	if c.registerer == nil {
		bad("Registerer: nil registerer")
	}
	if c.maxTimers < 1 {
		bad("MaxTimers: must be at least 1, got %d", c.maxTimers)
	}
	if c.timerEvery <= 0 {
		bad("TimerInterval: must be positive, got %s", c.timerEvery)
	}
	if c.timerBatch < 1 {
		bad("TimerBatch: must be at least 1, got %d", c.timerBatch)
	}
	if c.idle < 0 {
		bad("IdleStreamTime: must not be negative, got %s", c.idle)
	}
	if _, err := statestore.ParseKind(string(c.storage)); err != nil {
		bad("Storage: %w", err)
	}
	if c.flush < 0 {
		bad("ProducerFlush: must not be negative, got %s", c.flush)
	}
	if err := c.retry.validate(); err != nil {
		bad("RestartBackoff: %w", err)
	}
	if c.topicEvery <= 0 {
		bad("TopicCheckInterval: must be positive, got %s", c.topicEvery)
	}
	errs = append(errs, c.cache.validate()...)
	return errors.Join(errs...)
}

// StateDir is where the group keeps its LevelDB tables (required, except with
// Tester: there is no default). Goka's default, a path under the OS temp dir,
// is never used: state must be tied to the broker it was built from.
func StateDir(dir string) Opt { return func(c *runConfig) { c.stateDir = dir } }

// Storage chooses the local store of the group table (default
// statestore.Default, which Storage("") keeps; BENCHMARKS.md has the
// measurements behind it).
func Storage(kind statestore.Kind) Opt {
	return func(c *runConfig) {
		if kind != "" {
			c.storage = kind
		}
	}
}

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

// GokaOptions appends raw Goka options (for tests and advanced use; default
// none); they cannot replace the hasher, which is always the pinned one.
func GokaOptions(opts ...goka.ProcessorOption) Opt {
	return func(c *runConfig) { c.extra = append(c.extra, opts...) }
}

// Registerer sets where the processor's metrics are registered (default
// prometheus.DefaultRegisterer). Processors sharing a registerer share its
// collectors, their series told apart by the group label.
func Registerer(reg prometheus.Registerer) Opt { return func(c *runConfig) { c.registerer = reg } }

// DefaultMaxSkew is how far ahead of the wall clock an input's HLC may be
// before it is dead-lettered as future-hlc, by default. Devices' clocks drift by
// seconds; minutes ahead means a broken clock, and applying it would freeze the
// key (every later input would look stale).
const DefaultMaxSkew = 5 * time.Minute

// ReplayWindow bounds how many inputs per key and input partition the kit
// remembers with their outputs (default DefaultReplayWindow). It remembers
// only those at or above the committed offset, and applies at most this many
// of a key's inputs that emitted ahead of the commit: the next waits for the
// commit to pass the oldest (output-less inputs beyond it are forgotten). Only when the committed offsets are unknown (Goka's
// tester) does it drop the oldest instead. A larger window lets a hot key run
// further ahead of stalled commits at the cost of a larger table value.
func ReplayWindow(n int) Opt { return func(c *runConfig) { c.window = n } }

// MaxClockSkew sets how far ahead of the wall clock an ordered input's HLC may
// be (default DefaultMaxSkew).
func MaxClockSkew(d time.Duration) Opt { return func(c *runConfig) { c.maxSkew = d } }

// Clock sets the wall clock the processor reads (default time.Now): the
// future-HLC check, wall-clock timers, idle stream time and the timer looks.
// What a handler writes never depends on it.
func Clock(now func() time.Time) Opt { return func(c *runConfig) { c.now = now } }

// CommittedOffsets replaces where the kit learns the group's committed offset
// per input partition (default: polled from the broker every
// DefaultCommitPoll; with Tester: unknown, so only ReplayWindow bounds the
// envelopes). next is the offset a restart would consume first; ok false
// when unknown (the window then drops the oldest instead of waiting). For
// tests and measurements that emulate commits.
func CommittedOffsets(f func(topic string, partition int32) (next int64, ok bool)) Opt {
	return func(c *runConfig) { c.committed = f }
}

// MaxTimers sets how many timers one key may have at once (default
// DefaultMaxTimers); SetTimer beyond it fails with ErrTooManyTimers. Timers
// live in the key's table value, so the bound bounds the value.
func MaxTimers(n int) Opt { return func(c *runConfig) { c.maxTimers = n } }

// TimerInterval sets how often the processor looks for due timers (default
// DefaultTimerInterval). A look reads only the due-time index, so it costs the
// due timers, not the keys; a timer fires up to one interval late.
func TimerInterval(d time.Duration) Opt { return func(c *runConfig) { c.timerEvery = d } }

// TimerBatch sets how many ticks may be in flight per partition (default
// DefaultTimerBatch): when many timers fall due at once, at most this many are
// queued ahead of a partition's input, and the next batch is sent as soon as
// half of them are handled. A larger batch sends fewer, larger produce
// requests but makes input wait longer during a burst.
func TimerBatch(n int) Opt { return func(c *runConfig) { c.timerBatch = n } }

// IdleStreamTime makes a partition that has processed no record for d of wall
// clock time have its stream time advanced to the wall clock (default 0:
// never; stream time moves only with data, so stream-time timers of a
// partition whose input stopped never fire). Use it when silence itself is
// the event, as in the debouncer's TIMEOUT exits; choose d no shorter than
// the timeouts, so a partition that is merely between records is not taken
// for idle.
func IdleStreamTime(d time.Duration) Opt { return func(c *runConfig) { c.idle = d } }

// ProducerFlush sets how long the processor's producer batches records before
// sending (default DefaultProducerFlush; 0 sends as soon as possible).
func ProducerFlush(d time.Duration) Opt { return func(c *runConfig) { c.flush = d } }

// RestartBackoff sets the first and the longest wait before a failed Goka
// processor is rebuilt (default DefaultRestartMin, DefaultRestartMax).
func RestartBackoff(first, longest time.Duration) Opt {
	return func(c *runConfig) { c.retry.min, c.retry.max = first, longest }
}
