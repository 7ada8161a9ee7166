package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/dueindex"
	"github.com/fencestream/fencestream/processors/group/internal/kafka"
	"github.com/fencestream/fencestream/processors/group/internal/statedir"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/dirlock"
)

// Processor is a built group ready to run. Goka's processor stays inside;
// Run replaces it with a fresh one after an error retrying can fix (a Goka
// processor runs once).
type Processor struct {
	cur    atomic.Pointer[goka.Processor]
	build  func() (*goka.Processor, error) // a fresh Goka processor, same options
	name   string
	log    *slog.Logger
	timers *timerDriver // nil when the group has no timers
	// commits, when set, is polled from cl while the processor runs.
	commits *commitWatch
	cl      cluster.Config
	dir     string // the state directory, locked while Run runs ("" with Tester)
	health  *health
	retry   retryConfig
	m       *metrics
	topics  *topicWatch  // nil with Tester
	rcache  *recordCache // RecordCache's (nil: off)
	// stopWait bounds the wait for Goka to stop (0: DefaultStopWait).
	stopWait time.Duration
}

// gp is the current Goka processor.
func (p *Processor) gp() *goka.Processor { return p.cur.Load() }

// Owned lists the partitions this instance processes (not those it only keeps
// a hot standby copy of), sorted.
func (p *Processor) Owned(ctx context.Context) []int32 {
	var out []int32
	st := p.gp().StatsWithContext(ctx)
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

// Group is the name of the processor's group.
func (p *Processor) Group() string { return p.name }

// Processed counts the records of input topic this instance has processed
// since it started, and the last offset it processed per partition.
func (p *Processor) Processed(topic string) (n int, last map[int32]int64) {
	last = map[int32]int64{}
	for part, pp := range p.gp().Stats().Group {
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

// Emitted counts the records this instance has emitted to topic since it
// started, acknowledged or not. Next to the downstream group's Processed
// count it tells what is still in flight between two groups: end offsets
// cannot, because an emit not yet acknowledged is not on the topic yet.
func (p *Processor) Emitted(topic string) int {
	n := 0
	for _, pp := range p.gp().Stats().Group {
		if pp == nil {
			continue
		}
		if out := pp.Output[topic]; out != nil {
			n += int(out.Count)
		}
	}
	return n
}

// Recovered reports whether every table partition this instance holds,
// active or hot standby, has caught up with its changelog.
func (p *Processor) Recovered() bool { return p.gp().Recovered() }

// WaitForReadyContext blocks until every partition the processor owns has
// recovered its table and is processing, or ctx ends. Across a restart (a
// broker outage) it waits for the processor that replaces the failed one;
// when Run has ended for good it returns Run's error (nil: a clean stop).
func (p *Processor) WaitForReadyContext(ctx context.Context) error {
	for {
		gp, changed := p.health.current(p)
		if err := gp.WaitForReadyContext(ctx); err != nil {
			return err
		}
		if gp.Recovered() && p.gp() == gp {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.health.ended:
			return p.health.endErr()
		case <-changed:
		}
	}
}

// Processor checks the topology against the broker (creating missing topics
// unless NoCreateTopics), ties the state directory to the broker's cluster id,
// and builds the Goka processor with the pinned hasher and oldest-offset start.
// It does not change g: each call builds a processor of its own (its options,
// stream time, timer index and metrics), sharing only what g registered.
func (g *Group[S, PS]) Processor(ctx context.Context, cl cluster.Config, opts ...Opt) (*Processor, error) {
	cfg := newConfig(atRun, opts)
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	// The same validation with the tester as against a broker: a topology that
	// would be refused in production must not pass its unit tests.
	if err := g.topo.Validate(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	var commits *commitWatch
	if cfg.committed == nil && cfg.tester == nil {
		commits = newCommitWatch()
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", g.name, err)
	}
	// The due-time index of the group's timers sees the table's stores (it is
	// built from each partition's store once recovered) and the assignment.
	var idx *dueindex.Index
	indexed := func(b storage.Builder) storage.Builder { return b }
	if g.timers {
		idx = dueindex.New(string(goka.GroupTable(goka.Group(g.name))), g.log)
		indexed = idx.StorageBuilder
	}
	// The envelope cache sees every write of the table's stores (outermost,
	// so no wrapper's write passes it).
	envs := newEnvCache(g.envBudget, cfg.tester != nil)
	if envs != nil {
		table, inner := string(goka.GroupTable(goka.Group(g.name))), indexed
		indexed = func(b storage.Builder) storage.Builder { return envs.storageBuilder(table, inner(b)) }
	}
	in := g.instance(&cfg, m, idx)
	if idx != nil {
		idx.Restore = in.clock.restore
	}
	if envs != nil {
		in.envs = envs
		in.cacheStates, in.states = in.states != nil, nil
	}
	if commits != nil {
		in.rt.committed, in.rt.hurry = commits.committed, commits.hurry
	}
	gg, err := g.graph(in)
	if err != nil {
		return nil, err
	}
	// NilProcess: a null value on a stream reaches wrap, which dead-letters it;
	// Goka's default would drop it silently.
	popts := []goka.ProcessorOption{goka.WithLogger(kafka.Logger{L: g.log}), goka.WithNilHandling(goka.NilProcess)}
	var newEmitter func() (*goka.Emitter, error)
	health := newHealth()
	var built atomic.Pointer[Processor] // for the storage's callbacks, set once built
	var dir string
	var watch *topicWatch
	var rc *recordCache
	if cfg.tester != nil {
		popts = append(popts, goka.WithTester(cfg.tester), goka.WithStorageBuilder(indexed(cfg.tester.StorageBuilder())))
		newEmitter = func() (*goka.Emitter, error) {
			return goka.NewEmitter(nil, goka.Stream(g.decl.Timers), codecs.For[kitpb.Tick](), goka.WithEmitterTester(cfg.tester), topology.GokaEmitterHasher())
		}
	} else {
		sc, err := cl.Sarama()
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		markNullKeys(sc) // null and empty input keys get different dead-letter reasons
		clusterID, err := CheckBroker(ctx, cl, g.topo, !cfg.noCreate)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		dir = filepath.Join(cfg.stateDir, g.name)
		// Locked while claimed, and again for as long as Run runs: a second
		// process on the directory is refused before it reads the marker.
		lock, err := dirlock.Acquire(dir)
		if err != nil {
			return nil, fmt.Errorf("group %s: state directory: %w", g.name, err)
		}
		err = statedir.Claim(dir, clusterID)
		if err == nil {
			watch, err = newTopicWatch(ctx, cl, g.name, dir, g.decl, cfg.topicEvery, cfg.registerer, g.log)
		}
		_ = lock.Release()
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		popts = append(popts, kafka.ProcessorOptions(sc)...)
		pc := g.outputConfig(cfg.producerConfig(sc))
		pc, in.rt.deadLetterBytes = g.deadLetterRoom(ctx, cl, pc)
		popts = append(popts, goka.WithProducerBuilder(deadLetterProducerBuilder(kafka.ProducerBuilder(pc), g.deadLetter, g.log, m, g.name)))
		brokers := cl.Brokers
		newEmitter = func() (*goka.Emitter, error) {
			return goka.NewEmitter(brokers, goka.Stream(g.decl.Timers), codecs.For[kitpb.Tick](),
				goka.WithEmitterProducerBuilder(kafka.ProducerBuilder(cfg.producerConfig(sc))),
				goka.WithEmitterClientID(g.name+"-timers"), topology.GokaEmitterHasher())
		}
		sb, err := statestore.Builder(cfg.storage, dir, append([]statestore.Opt{statestore.Logger(g.log),
			statestore.OnDamaged(func(string, string, error) { m.stateDamaged.WithLabelValues(g.name).Inc() }),
			statestore.OnUnwritable(func(err error) {
				health.setFatal(err)
				if proc := built.Load(); proc != nil {
					go proc.gp().Stop() // not from inside a storage call Goka may hold locks around
				}
			})}, cfg.storeOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		}
		if rc, err = in.recordCache(&cfg, sc, cl.Brokers, g.log); err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
		} else if rc != nil {
			popts = append(popts, goka.WithConsumerGroupBuilder(kafka.GatedConsumerGroupBuilder(sc, rc.gate)))
			inner := indexed
			indexed = func(b storage.Builder) storage.Builder { return rc.storageBuilder(inner(b)) }
		}
		popts = append(popts, goka.WithStorageBuilder(indexed(sb)))
		if cfg.hotStandby {
			popts = append(popts, goka.WithHotStandby())
		}
		if cfg.recoverAhead {
			popts = append(popts, goka.WithRecoverAhead())
		}
	}
	popts = append(popts, cfg.extra...)
	if idx != nil { // after extra: the index must know the assignment
		popts = append(popts, goka.WithRebalanceCallback(func(a goka.Assignment) {
			g.log.Debug("partitions assigned", "partitions", len(a))
			idx.Assigned(a)
		}))
	}
	popts = append(popts, topology.GokaProcessorHasher()) // last: nothing overrides it
	var brokers []string
	if cfg.tester == nil {
		brokers = cl.Brokers
	}
	buildGoka := func() (*goka.Processor, error) {
		p, err := goka.NewProcessor(brokers, gg, popts...)
		if err != nil {
			return nil, fmt.Errorf("group %s: building processor: %w", g.name, err)
		}
		return p, nil
	}
	p, err := buildGoka()
	if err != nil {
		return nil, err
	}
	proc := &Processor{build: buildGoka, name: g.name, log: g.log, dir: dir, health: health, retry: cfg.retry, commits: commits, cl: cl, m: m, topics: watch, rcache: rc}
	if cfg.tester != nil {
		proc.build = nil // the tester's processor runs once
	}
	proc.cur.Store(p)
	built.Store(proc)
	if g.timers {
		proc.timers = &timerDriver{name: g.name, every: cfg.timerEvery, batch: cfg.timerBatch, now: cfg.now, streamNow: in.clock.now,
			idx: idx, auto: cfg.tester == nil, log: g.log, newEmitter: newEmitter}
		if cfg.tester != nil {
			// Tests call FireTimers without Run; the tester's producer costs nothing.
			if err := proc.timers.start(); err != nil {
				return nil, err
			}
		}
	}
	return proc, nil
}

// Run runs until ctx is canceled (a clean stop returns nil) or the processor
// fails on an error that retrying cannot fix (wrapping ErrPermanent); after
// any other error it rebuilds Goka's processor and runs it again, with
// backoff (RestartBackoff), resuming from the committed offsets and the local
// state. The state directory is locked for as long as Run runs. Goka's
// stale-cache error gets the fix spelled out.
func (p *Processor) Run(ctx context.Context) (err error) {
	defer func() { p.health.finish(err) }()
	if p.dir != "" {
		lock, err := dirlock.Acquire(p.dir)
		if err != nil {
			p.log.Error("processor not started", "err", err)
			return fmt.Errorf("group %s: state directory: %w: %w", p.name, ErrPermanent, err)
		}
		defer func() { _ = lock.Release() }()
	}
	p.log.Info("processor starting")
	defer p.m.recovery.running(p)()
	if p.commits != nil {
		pollCtx, stopPoll := context.WithCancel(ctx)
		polled := make(chan struct{})
		go func() { defer close(polled); p.commits.run(pollCtx, p.cl, p.name, DefaultCommitPoll, p.log) }()
		defer func() { stopPoll(); <-polled }()
	}
	if p.rcache != nil {
		// Flushes until Goka has stopped (a defer runs after Goka's Run).
		rcCtx, stopRC := context.WithCancel(context.Background())
		flushed := make(chan struct{})
		go func() { defer close(flushed); p.rcache.run(rcCtx) }()
		defer func() { stopRC(); <-flushed }()
	}
	gokaCtx := ctx
	if p.topics != nil {
		var stopWatch func()
		gokaCtx, stopWatch = p.watchTopics(ctx) // canceled when a topic changes under the group
		defer stopWatch()
	}
	if p.timers != nil && p.timers.auto {
		// The timer driver sends ticks with a producer of its own; it stops
		// (and flushes) after Goka has.
		if err := p.timers.start(); err != nil {
			return err
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); p.driveTimers(stop) }()
		defer func() { close(stop); <-done; p.timers.stop() }()
	}
	if p.build == nil { // under Tester: run once, as Goka does
		err = p.gp().Run(gokaCtx)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	} else {
		err = p.runGoka(ctx, gokaCtx)
	}
	if err != nil {
		p.log.Error("processor stopped with error", "err", err)
		return fmt.Errorf("group %s: %w", p.name, err)
	}
	p.log.Info("processor stopped")
	return nil
}

// instance makes a build of g with the options of cfg.
func (g *Group[S, PS]) instance(cfg *config, m *metrics, idx *dueindex.Index) *instance[S, PS] {
	in := &instance[S, PS]{Group: g, m: m, index: idx, clock: newStreamClock(cfg.idle), handles: g.handles, states: newStateCache[PS](g.stateBudget),
		rt: runtime{window: cfg.window, maxSkew: cfg.maxSkew, now: cfg.now, maxTimers: cfg.maxTimers, timerEvery: cfg.timerEvery, committed: cfg.committed, waits: cfg.tester == nil,
			deadLetterBytes: deadLetterLimit(sarama.NewConfig().Producer.MaxMessageBytes, kafkaMaxMessageBytes)}}
	in.digestBufs.New = func() any { b := make([]byte, 0, 256); return &b }
	return in
}
