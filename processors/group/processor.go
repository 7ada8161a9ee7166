package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/kitpb"
	"github.com/fencestream/fencestream/processors/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

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
	cfg := runConfig{window: DefaultReplayWindow, maxSkew: DefaultMaxSkew, now: time.Now, registerer: prometheus.DefaultRegisterer, maxTimers: DefaultMaxTimers, timerEvery: DefaultTimerInterval, timerBatch: DefaultTimerBatch}
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
	// The due-time index of the group's timers sees the table's stores (it is
	// built from each partition's store once recovered) and the assignment.
	var idx *timerIndex
	indexed := func(b storage.Builder) storage.Builder { return b }
	if g.timers {
		idx = newTimerIndex(string(goka.GroupTable(goka.Group(g.name))), g.log)
		indexed = idx.storageBuilder
	}
	g.index = idx
	var newEmitter func() (*goka.Emitter, error)
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
		brokers := cl.Brokers
		newEmitter = func() (*goka.Emitter, error) {
			return goka.NewEmitter(brokers, goka.Stream(g.decl.Timers), codecs.For[kitpb.Tick](),
				goka.WithEmitterProducerBuilder(goka.ProducerBuilderWithConfig(cfg.producerConfig(sc))),
				goka.WithEmitterClientID(g.name+"-timers"), topology.GokaEmitterHasher())
		}
		sb, err := statestore.Builder(cfg.storageKind(), dir, statestore.Logger(g.log))
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.name, err)
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
			idx.assigned(a)
		}))
	}
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
		proc.timers = &timerDriver{name: g.name, every: cfg.timerEvery, batch: cfg.timerBatch, now: cfg.now, streamNow: g.clock.now,
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
// fails. Goka's stale-cache error gets the fix spelled out.
func (p *Processor) Run(ctx context.Context) error {
	p.log.Info("processor starting")
	running.Store(p, struct{}{})
	defer running.Delete(p)
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
	err := p.p.Run(ctx)
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
