package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
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
	idle         time.Duration
	storage      statestore.Kind // see storage.go
	flush        time.Duration
	flushSet     bool
}

// Registerer sets where the kit's metrics are registered (default
// prometheus.DefaultRegisterer).
func Registerer(reg prometheus.Registerer) Opt { return func(c *runConfig) { c.registerer = reg } }

// DefaultMaxSkew is how far ahead of the wall clock an input's HLC may be
// before it is dead-lettered as future-hlc, by default. Devices' clocks drift by
// seconds; minutes ahead means a broken clock, and applying it would freeze the
// key (every later input would look stale).
const DefaultMaxSkew = 5 * time.Minute

// ReplayWindow sets how many recent inputs per key and input partition the
// kit remembers with their outputs (default DefaultReplayWindow). A larger
// window recognises older redeliveries and exact replays at the cost of a
// larger state value.
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
	if c.window < 1 {
		return fmt.Errorf("replay window must be at least 1, got %d", c.window)
	}
	if c.maxTimers < 1 {
		return fmt.Errorf("maximum timers per key must be at least 1, got %d", c.maxTimers)
	}
	if c.timerEvery <= 0 {
		return fmt.Errorf("timer interval must be positive, got %s", c.timerEvery)
	}
	if c.idle < 0 {
		return fmt.Errorf("idle stream time must not be negative, got %s", c.idle)
	}
	if c.maxSkew <= 0 {
		return fmt.Errorf("maximum clock skew must be positive, got %s", c.maxSkew)
	}
	return nil
}

// ErrStateMismatch is wrapped when local state belongs to another cluster.
var ErrStateMismatch = errors.New("local state does not belong to this broker")

// Processor is a built group ready to run. Goka's processor stays inside.
type Processor struct {
	p      *goka.Processor
	name   string
	log    *slog.Logger
	timers *timerDriver // nil when the group has no timers
}

// Owned lists the partitions this instance processes (not those it only keeps
// a hot standby copy of), sorted.
func (p *Processor) Owned(ctx context.Context) []int32 {
	var out []int32
	st := p.p.StatsWithContext(ctx)
	if st == nil {
		return nil
	}
	for part, pp := range st.Group {
		if pp != nil && pp.TableStats != nil && pp.TableStats.RunMode == 0 {
			out = append(out, part)
		}
	}
	slices.Sort(out)
	return out
}

// shutdownVisitGrace bounds how long a stopping processor waits for a look
// for due timers to finish before aborting it.
const shutdownVisitGrace = 5 * time.Second

// Processed counts the records of input topic this instance has processed
// since it started, and the last offset it processed per partition.
func (p *Processor) Processed(topic string) (n int, last map[int32]int64) {
	last = map[int32]int64{}
	for part, pp := range p.p.Stats().Group {
		if pp == nil {
			continue
		}
		if in := pp.Input[topic]; in != nil {
			n += int(in.Count)
			last[part] = in.LastOffset
		}
	}
	return n, last
}

// Recovered reports whether every table partition this instance holds,
// active or hot standby, has caught up with its changelog.
func (p *Processor) Recovered() bool { return p.p.Recovered() }

// WaitForReadyContext blocks until every partition the processor owns has
// recovered its table and is processing, or ctx ends.
func (p *Processor) WaitForReadyContext(ctx context.Context) error {
	return p.p.WaitForReadyContext(ctx)
}

// Processor checks the topology against the broker (creating missing topics
// unless NoCreateTopics), ties the state directory to the broker's cluster id,
// and builds the Goka processor with the pinned hasher and oldest-offset start.
func (g *Group[S, PS]) Processor(ctx context.Context, cl cluster.Config, opts ...Opt) (*Processor, error) {
	cfg := runConfig{window: DefaultReplayWindow, maxSkew: DefaultMaxSkew, now: time.Now, registerer: prometheus.DefaultRegisterer, maxTimers: DefaultMaxTimers, timerEvery: DefaultTimerInterval}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	// The same validation with the tester as against a broker: a topology that
	// would be refused in production must not pass its unit tests.
	if err := g.topo.Validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	g.rt = runtime{window: cfg.window, maxSkew: cfg.maxSkew, now: cfg.now, maxTimers: cfg.maxTimers, timerEvery: cfg.timerEvery}
	g.clock.idle = cfg.idle
	if err := RegisterMetrics(cfg.registerer); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	gg, err := g.Graph()
	if err != nil {
		return nil, err
	}
	// NilProcess: a null value on a stream reaches wrap, which dead-letters it;
	// Goka's default would drop it silently.
	popts := []goka.ProcessorOption{goka.WithLogger(gokaLogger{g.log}), goka.WithNilHandling(goka.NilProcess)}
	if cfg.tester != nil {
		popts = append(popts, goka.WithTester(cfg.tester))
	} else {
		sc, err := cl.Sarama()
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		clusterID, err := CheckBroker(ctx, cl, g.topo, !cfg.noCreate)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		dir := filepath.Join(cfg.stateDir, g.name)
		if err := claimStateDir(dir, clusterID); err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		popts = append(popts, SaramaOptions(sc)...)
		popts = append(popts, goka.WithProducerBuilder(goka.ProducerBuilderWithConfig(cfg.producerConfig(sc))))
		sb, err := statestore.Builder(cfg.storageKind(), dir, statestore.Logger(g.log))
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		popts = append(popts, goka.WithStorageBuilder(sb))
		if cfg.hotStandby {
			popts = append(popts, goka.WithHotStandby())
		}
		if cfg.recoverAhead {
			popts = append(popts, goka.WithRecoverAhead())
		}
	}
	popts = append(popts, cfg.extra...)
	popts = append(popts, topology.GokaProcessorHasher()) // last: nothing overrides it
	var brokers []string
	if cfg.tester == nil {
		brokers = cl.Brokers
	}
	p, err := goka.NewProcessor(brokers, gg, popts...)
	if err != nil {
		return nil, fmt.Errorf("group %s: building processor: %w", g.name, err)
	}
	proc := &Processor{p: p, name: g.name, log: g.log}
	if g.timers {
		proc.timers = &timerDriver{every: cfg.timerEvery, now: cfg.now, pending: g.pending, auto: cfg.tester == nil}
	}
	return proc, nil
}

// Run runs until ctx is canceled (a clean stop returns nil) or the processor
// fails. Goka's stale-cache error gets the fix spelled out.
func (p *Processor) Run(ctx context.Context) error {
	p.log.Info("processor starting")
	running.Store(p, struct{}{})
	defer running.Delete(p)
	gokaCtx := ctx
	if p.timers != nil && p.timers.auto {
		// Shut down in order: the timer driver first, letting a look in
		// progress finish, then Goka. A visit Goka aborts (context ended,
		// partitions stopping) returns before its in-flight visits count
		// themselves, a data race inside Goka (Processor.VisitAllWithStats
		// reads the count they still add to).
		var cancelGoka context.CancelFunc
		gokaCtx, cancelGoka = context.WithCancel(context.Background())
		defer cancelGoka()
		visitCtx, cancelVisits := context.WithCancel(context.Background())
		defer cancelVisits()
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); p.driveTimers(stop, visitCtx) }()
		go func() {
			select {
			case <-ctx.Done():
			case <-gokaCtx.Done(): // Goka stopped by itself
			}
			close(stop)
			select {
			case <-done:
			case <-time.After(shutdownVisitGrace): // a look stuck on a partition that will not run
				cancelVisits()
				<-done
			}
			cancelGoka()
		}()
		defer func() { cancelGoka(); <-done }()
	}
	err := p.p.Run(gokaCtx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil && strings.Contains(err.Error(), "our cache has one") {
		err = fmt.Errorf("%w: %v: the local state is ahead of the broker (was the broker's data wiped?); stop the processor and delete its state directory, it is rebuilt from the changelog", ErrStateMismatch, err)
	}
	if err != nil {
		p.log.Error("processor stopped with error", "err", err)
		return fmt.Errorf("group %s: %w", p.name, err)
	}
	p.log.Info("processor stopped")
	return nil
}

// SaramaOptions are the Goka processor options that make every client of the
// processor use sc (oldest offset, TLS, SASL), never Goka's global config.
func SaramaOptions(sc *sarama.Config) []goka.ProcessorOption {
	return []goka.ProcessorOption{
		goka.WithConsumerGroupBuilder(ConsumerGroupBuilder(sc)), // no 5 s sleep per rebalance
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(sc)),
		goka.WithProducerBuilder(goka.ProducerBuilderWithConfig(sc)),
		goka.WithTopicManagerBuilder(TopicManagerBuilder(sc)),
	}
}

// TopicManagerConfig makes Goka's topic manager fail on mismatches and never
// create topics: topology.Ensure owns creation with the declared settings.
func TopicManagerConfig() *goka.TopicManagerConfig {
	tmc := goka.NewTopicManagerConfig()
	tmc.MismatchBehavior = goka.TMConfigMismatchBehaviorFail
	tmc.NoCreate = true
	return tmc
}

// TopicManagerBuilder builds Goka's topic manager with sc, reduced to what the
// topology does not already own: topics must exist (never created by Goka) and
// have the partition count Goka expects. Cleanup policy and partition counts
// were checked against the declarations by CheckBroker; Goka's own checks of
// retention (1 h) and replication factor (2) would refuse any cluster whose
// defaults differ, e.g. a loop topic created with the broker's retention.
func TopicManagerBuilder(sc *sarama.Config) goka.TopicManagerBuilder {
	inner := goka.TopicManagerBuilderWithConfig(sc, TopicManagerConfig())
	return func(brokers []string) (goka.TopicManager, error) {
		tm, err := inner(brokers)
		if err != nil {
			return nil, err
		}
		return partitionsOnly{tm}, nil
	}
}

type partitionsOnly struct{ goka.TopicManager }

func (m partitionsOnly) check(topic string, npar int) error {
	parts, err := m.Partitions(topic)
	if err != nil {
		return fmt.Errorf("topic %s: %w (run topology Ensure / fencectl topology check --create)", topic, err)
	}
	if len(parts) != npar {
		return fmt.Errorf("topic %s has %d partitions but the group's other topics have %d: keys would live on different partition numbers", topic, len(parts), npar)
	}
	return nil
}

func (m partitionsOnly) EnsureStreamExists(topic string, npar int) error { return m.check(topic, npar) }
func (m partitionsOnly) EnsureTableExists(topic string, npar int) error  { return m.check(topic, npar) }
func (m partitionsOnly) EnsureTopicExists(topic string, npar, _ int, _ map[string]string) error {
	return m.check(topic, npar)
}

// CheckBroker compares the broker with the topology (creating missing topics when
// create is set) and returns the broker's cluster id. A mismatch is an error
// naming the topic, both settings, and why the binary refuses to start.
func CheckBroker(ctx context.Context, cl cluster.Config, topo *topology.Topology, create bool) (string, error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return "", err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	meta, err := adm.BrokerMetadata(cctx)
	if err != nil {
		return "", fmt.Errorf("broker %s unreachable: %w", strings.Join(cl.Brokers, ","), err)
	}
	if create {
		err = topo.Ensure(cctx, adm)
	} else {
		err = topo.Check(cctx, adm)
	}
	if err != nil {
		return "", err
	}
	return meta.Cluster, nil
}

type stateMarker struct {
	ClusterID string `json:"cluster_id"`
	Created   string `json:"created"`
}

const markerFile = "fencestream-state.json"

// CheckStateDir reports whether the state a group keeps in dir was built
// from cluster clusterID, without claiming the directory: nil when dir holds
// no marker yet (the group claims it when it starts), an ErrStateMismatch
// naming both clusters otherwise. A binary can refuse mismatched state before
// it announces anything.
func CheckStateDir(dir, clusterID string) error {
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	var m stateMarker
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: %s is unreadable (%v); delete %s to rebuild state from the broker", ErrStateMismatch, path, err, dir)
	}
	if m.ClusterID != clusterID {
		return fmt.Errorf("%w: %s was built from cluster %q but the broker is cluster %q", ErrStateMismatch, dir, m.ClusterID, clusterID)
	}
	return nil
}

// claimStateDir records which cluster the state in dir belongs to, and refuses a
// directory built from another cluster: Goka would otherwise fail later with a
// cryptic offset error, or silently mix two clusters' state.
func claimStateDir(dir, clusterID string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, markerFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		var m stateMarker
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%w: %s is unreadable (%v); delete %s to rebuild state from the broker", ErrStateMismatch, path, err, dir)
		}
		if m.ClusterID != clusterID {
			return fmt.Errorf("%w: %s was built from cluster %q but the broker is cluster %q; delete %s (state is rebuilt from the changelog topics) or point --state-dir elsewhere", ErrStateMismatch, dir, m.ClusterID, clusterID, dir)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 {
			return fmt.Errorf("%w: %s holds state of unknown origin; delete it to rebuild state from the broker", ErrStateMismatch, dir)
		}
		m, _ := json.Marshal(stateMarker{ClusterID: clusterID, Created: time.Now().UTC().Format(time.RFC3339)})
		return os.WriteFile(path, m, 0o644)
	default:
		return fmt.Errorf("state directory: %w", err)
	}
}

// gokaLogger sends Goka's chatter to slog at debug level.
type gokaLogger struct{ l *slog.Logger }

func (g gokaLogger) Print(v ...any)   { g.l.Debug(strings.TrimSpace(fmt.Sprint(v...))) }
func (g gokaLogger) Println(v ...any) { g.l.Debug(strings.TrimSpace(fmt.Sprintln(v...))) }
func (g gokaLogger) Printf(format string, v ...any) {
	g.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
