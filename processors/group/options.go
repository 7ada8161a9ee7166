package group

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/statestore"
)

// Opt configures a group. One type serves the two places a group takes
// options: New takes the options that say what the group is, written by the
// application (CacheEnvelopes, CacheStates, StateTTL, OrderedOutputs,
// OnDeadLetter); Processor and Run (and RunSkewReporter, which reads
// Registerer) take the ones that say how this process runs it, set by a
// main from its flags (every other option). Every option overrides one
// default of defaultConfig, which its doc names; the options given at one
// place are checked together (config.validate) before anything is built,
// and a bad one, or one given at the wrong place, is refused with an error
// naming it.
type Opt func(*config)

// place is where options are given: New or Processor (Run passes its own on).
type place int8

const (
	atNew place = iota
	atRun
)

func (p place) String() string {
	if p == atNew {
		return "New"
	}
	return "Processor or Run"
}

// groupOpt is an option of New, runOpt one of Processor and Run: set runs
// wherever the option is given, and an option given at the other place is
// recorded for validate, by name.
func groupOpt(name string, set func(*config)) Opt { return placed(atNew, name, set) }
func runOpt(name string, set func(*config)) Opt   { return placed(atRun, name, set) }

func placed(at place, name string, set func(*config)) Opt {
	return func(c *config) {
		if c.at != at {
			c.misplaced = append(c.misplaced, fmt.Errorf("%s: an option of %s, given to %s", name, at, c.at))
		}
		set(c)
	}
}

// config is what a group (New) and its processor (Processor) are built
// from; defaultConfig holds every default in one place.
type config struct {
	at        place
	misplaced []error

	// New's: what the group is.
	envBudget    int           // CacheEnvelopes; 0: no cache
	stateBudget  int           // CacheStates; 0: no cache
	ttl          time.Duration // StateTTL; 0: keys never expire
	ttlSet       bool
	ordered      bool                       // OrderedOutputs
	onDeadLetter func(topic, reason string) // OnDeadLetter; nil: none

	// Processor's and Run's: how this process runs it.
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
	storeOpts    []statestore.Opt
	flush        time.Duration
	committed    func(topic string, partition int32) (int64, bool)
	retry        retryConfig   // see reconnect.go
	topicEvery   time.Duration // see topicwatch.go
	cache        cacheConfig   // see recordcache.go
}

// defaultConfig is the one place the group's and the processor's defaults
// are written (the zero value of a field not named here is its default).
func defaultConfig() config {
	return config{
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

// newConfig is the defaults with opts given at at applied, in order.
func newConfig(at place, opts []Opt) config {
	c := defaultConfig()
	c.at = at
	for _, o := range opts {
		o(&c)
	}
	return c
}

// validate refuses options that cannot work, naming the option.
func (c *config) validate() error {
	errs := slices.Clone(c.misplaced)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.envBudget < 0 {
		bad("CacheEnvelopes: must not be negative, got %d", c.envBudget)
	}
	if c.stateBudget < 0 {
		bad("CacheStates: must not be negative, got %d", c.stateBudget)
	}
	if c.ttlSet && c.ttl <= 0 {
		bad("StateTTL: must be positive, got %s", c.ttl)
	}
	if c.at == atNew {
		// The run options keep their defaults here: only New's are checked.
		return errors.Join(errs...)
	}
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
		bad("Now: nil clock")
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
func StateDir(dir string) Opt { return runOpt("StateDir", func(c *config) { c.stateDir = dir }) }

// Storage chooses the local store of the group table (default
// statestore.Default, which Storage("") keeps; BENCHMARKS.md has the
// measurements behind it).
func Storage(kind statestore.Kind) Opt {
	return runOpt("Storage", func(c *config) {
		if kind != "" {
			c.storage = kind
		}
	})
}

// StorageOptions are passed to the store's builder after the kit's own
// (default: none), e.g. statestore.RedisServer for statestore.Redis.
func StorageOptions(opts ...statestore.Opt) Opt {
	return runOpt("StorageOptions", func(c *config) { c.storeOpts = append(c.storeOpts, opts...) })
}

// HotStandby keeps warm copies of the tables of partitions this instance does not
// own, so taking one over after a rebalance needs no full recovery (default off).
func HotStandby(on bool) Opt { return runOpt("HotStandby", func(c *config) { c.hotStandby = on }) }

// RecoverAhead recovers the tables of newly assigned partitions before the
// rebalance completes (default off).
func RecoverAhead(on bool) Opt {
	return runOpt("RecoverAhead", func(c *config) { c.recoverAhead = on })
}

// Tester runs the group against Goka's in-memory tester instead of a broker
// (default: a broker); the topology check and state directory are skipped.
func Tester(tt *tester.Tester) Opt { return runOpt("Tester", func(c *config) { c.tester = tt }) }

// NoCreateTopics makes start-up only check the topology against the broker
// instead of creating missing topics (default: create missing, refuse mismatches).
func NoCreateTopics() Opt { return runOpt("NoCreateTopics", func(c *config) { c.noCreate = true }) }

// GokaOptions appends raw Goka options (for tests and advanced use; default
// none); they cannot replace the hasher, which is always the pinned one.
func GokaOptions(opts ...goka.ProcessorOption) Opt {
	return runOpt("GokaOptions", func(c *config) { c.extra = append(c.extra, opts...) })
}

// Registerer sets where the processor's metrics are registered (default
// prometheus.DefaultRegisterer). Processors sharing a registerer share its
// collectors, their series told apart by the group label.
func Registerer(reg prometheus.Registerer) Opt {
	return runOpt("Registerer", func(c *config) { c.registerer = reg })
}

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
func ReplayWindow(n int) Opt { return runOpt("ReplayWindow", func(c *config) { c.window = n }) }

// MaxClockSkew sets how far ahead of the wall clock an ordered input's HLC may
// be (default DefaultMaxSkew).
func MaxClockSkew(d time.Duration) Opt {
	return runOpt("MaxClockSkew", func(c *config) { c.maxSkew = d })
}

// Now sets the wall clock the processor reads (default time.Now): the
// future-HLC check, wall-clock timers, idle stream time and the timer looks.
// What a handler writes never depends on it.
func Now(now func() time.Time) Opt { return runOpt("Now", func(c *config) { c.now = now }) }

// CommittedOffsets replaces where the kit learns the group's committed offset
// per input partition (default: polled from the broker every
// DefaultCommitPoll; with Tester: unknown, so only ReplayWindow bounds the
// envelopes). next is the offset a restart would consume first; ok false
// when unknown (the window then drops the oldest instead of waiting). For
// tests and measurements that emulate commits.
func CommittedOffsets(f func(topic string, partition int32) (next int64, ok bool)) Opt {
	return runOpt("CommittedOffsets", func(c *config) { c.committed = f })
}

// MaxTimers sets how many timers one key may have at once (default
// DefaultMaxTimers); SetTimer beyond it fails with ErrTooManyTimers. Timers
// live in the key's table value, so the bound bounds the value.
func MaxTimers(n int) Opt { return runOpt("MaxTimers", func(c *config) { c.maxTimers = n }) }

// TimerInterval sets how often the processor looks for due timers (default
// DefaultTimerInterval). A look reads only the due-time index, so it costs the
// due timers, not the keys; a timer fires up to one interval late.
func TimerInterval(d time.Duration) Opt {
	return runOpt("TimerInterval", func(c *config) { c.timerEvery = d })
}

// TimerBatch sets how many ticks may be in flight per partition (default
// DefaultTimerBatch): when many timers fall due at once, at most this many are
// queued ahead of a partition's input, and the next batch is sent as soon as
// half of them are handled. A larger batch sends fewer, larger produce
// requests but makes input wait longer during a burst.
func TimerBatch(n int) Opt { return runOpt("TimerBatch", func(c *config) { c.timerBatch = n }) }

// IdleStreamTime makes a partition that has processed no record for d of wall
// clock time have its stream time advanced to the wall clock (default 0:
// never).
//
// Stream time is kept per input partition and moves only with records that
// arrive on that partition (any key's). So without this option a stream-time
// timer (and a window's close, a session's gap, a state TTL) fires only when
// a later record arrives on its key's partition; records on other partitions
// do not move it. It is needed when a timer must fire although its partition
// may receive nothing more for a while: silence is the event (the debouncer's
// TIMEOUT exits), or the input is sparse (few keys per partition, e.g.
// triggers spread over 24 partitions), or the last window of a stream that
// stops must close. It is not needed when every partition receives records
// steadily: a timer is then late by at most the gap between two records of
// its partition.
//
// Choose d longer than the longest normal gap between two records of a
// partition plus how far the producers' event time trails the wall clock,
// and no shorter than the delays the timers measure. Once a partition is
// taken for idle its stream time is the wall clock, so a record that arrives
// afterwards with an older event time is judged against it: late for windows
// and joins whose grace it exceeds, and after timers that it would have
// moved or cancelled. A partition catching up on a backlog is never idle.
//
// Why not on by default: with 0, what a group writes depends only on its
// input, so a reset and a replay give the same results; an idle-advanced
// stream time depends on when records arrived, and no single d fits every
// input's gaps.
func IdleStreamTime(d time.Duration) Opt {
	return runOpt("IdleStreamTime", func(c *config) { c.idle = d })
}

// ProducerFlush sets how long the processor's producer batches records before
// sending (default DefaultProducerFlush; 0 sends as soon as possible).
func ProducerFlush(d time.Duration) Opt {
	return runOpt("ProducerFlush", func(c *config) { c.flush = d })
}

// RestartBackoff sets the first and the longest wait before a failed Goka
// processor is rebuilt (default DefaultRestartMin, DefaultRestartMax).
func RestartBackoff(first, longest time.Duration) Opt {
	return runOpt("RestartBackoff", func(c *config) { c.retry.min, c.retry.max = first, longest })
}

// OnReady sets a function called with the processor once it is ready
// (default: none). Used by Group.Run.
func OnReady(fn func(*Processor)) Opt { return runOpt("OnReady", func(c *config) { c.onReady = fn }) }

// TopicCheckInterval sets how often a running processor checks its topics'
// identity and partition counts (default DefaultTopicCheck). A change is seen
// within about one interval (a deleted topic within two: one missing answer
// is not taken for a deletion).
func TopicCheckInterval(d time.Duration) Opt {
	return runOpt("TopicCheckInterval", func(c *config) { c.topicEvery = d })
}

// The options of New: what the group is.

// CacheEnvelopes keeps the decoded table values (envelopes) of the group's
// keys in memory, up to budget bytes of their encodings (default 0: none;
// the decoded objects take a few times that), so a callback on a key this
// process wrote last reads its envelope without a store read or a decode:
// the kit's envelope is then paid for once per write, not once per read as
// well. It asks nothing of handlers (the envelope is the kit's). With
// CacheStates as well, the decoded states are kept in the same entries,
// under this budget (CacheStates' own is then unused). The invariant that
// keeps the guarantee unchanged is in envcache.go.
func CacheEnvelopes(budget int) Opt {
	return groupOpt("CacheEnvelopes", func(c *config) { c.envBudget = budget })
}

// CacheStates keeps decoded states of the group's keys in memory, up to
// budget bytes of their encodings (default 0: none; the decoded objects take
// a few times that), so a callback whose key's stored state is, byte for
// byte, what this process last wrote for it gets that object from State
// instead of decoding it again. The stored bytes decide, so a key another
// instance wrote, or one rebuilt from the changelog, is decoded as before.
//
// It is for handlers that treat their state as theirs only during the
// callback: State hands the object over, SetState hands it back (it is
// cached when the write is made), and a handler must not keep it, or change
// it after SetState, once the callback returns. A state that State returned
// and SetState did not take back is not cached.
func CacheStates(budget int) Opt {
	return groupOpt("CacheStates", func(c *config) { c.stateBudget = budget })
}

// StateTTL removes a key's whole table value — state, timers and the memory of
// recent inputs — once stream time passes the event time of its latest input
// plus ttl (the stream time at the input when its stream declares no
// EventTime; default: keys never expire). Timer handlers do not count as
// touches; inputs do, whether or not they change the state. The group needs
// timers declared (topology.Processor.Timers).
//
// Choose ttl far longer than the offset-commit interval in stream time: an
// input redelivered after its key expired is applied again, to a fresh key.
func StateTTL(ttl time.Duration) Opt {
	return groupOpt("StateTTL", func(c *config) { c.ttl, c.ttlSet = ttl, true })
}

// OrderedOutputs makes the group's processor keep one produce request in
// flight per broker (default off: sarama's default of several), so that
// records it writes to one partition land in the order it wrote them even
// when a request fails and is retried. A consumer that drops a record at or
// below the last position it applied from the same source — occupancy's
// per-partition source offsets — relies on that order.
//
// With the sarama this module pins (1.61) the order holds without it too:
// since 1.48 sarama mutes a partition while a batch for it is in flight,
// whatever Net.MaxOpenRequests. Before 1.48 it held with neither: on sarama
// 1.47 occupancy's TestOccupancyCountsExactUnderProduceRetries (a broker
// that holds requests and fails them with retriable errors) finds retried
// changes behind hundreds of later ones and wrong counts, with this option
// set. It stays as the kit's own statement of what the group needs, and
// costs throughput only when the broker is slow to answer.
func OrderedOutputs(on bool) Opt {
	return groupOpt("OrderedOutputs", func(c *config) { c.ordered = on })
}

// OnDeadLetter sets a function called with the input topic and the reason
// each time the group dead-letters an input (default: none), whether the kit
// did (a bad key, a stale HLC, a panic) or a handler: for an application's
// own counts of what its processor refused. It runs in the callback; keep it
// cheap and do not block.
func OnDeadLetter(fn func(topic, reason string)) Opt {
	return groupOpt("OnDeadLetter", func(c *config) { c.onDeadLetter = fn })
}
