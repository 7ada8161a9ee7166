package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
)

const (
	counterGroup = "bench-counter"
	counterTable = "bench-counter-table"
	poll         = 20 * time.Millisecond
	stageLimit   = 5 * time.Minute
)

// rawConsumer reads the pings with a plain franz-go consumer (no group).
func (e *env) rawConsumer(ctx context.Context) (Stage, error) {
	kopts, _ := e.cl.Kgo()
	c, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(geofence.TopicPings), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return Stage{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, stageLimit)
	defer cancel()
	// No group to join: timed from the first fetch on.
	t := timer{first: time.Now(), firstCPU: cpu()}
	n := 0
	for n < e.cfg.Pings {
		f := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Stage{}, fmt.Errorf("read %d of %d: %w", n, e.cfg.Pings, err)
		}
		n += f.NumRecords()
	}
	return t.stage(n), nil
}

// processed sums a processor's input counts for topic.
func processed(p *goka.Processor, topic string) (n int, last map[int32]int64) {
	last = map[int32]int64{}
	for part, pp := range p.Stats().Group {
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

// waitCount polls count until it reaches want, timing the stage.
func waitCount(ctx context.Context, errc <-chan error, want int, count func() int) (Stage, error) {
	deadline := time.Now().Add(stageLimit)
	var t timer
	for {
		n := count()
		t.observe(n)
		if n >= want {
			return t.stage(n), nil
		}
		select {
		case err := <-errc:
			return Stage{}, fmt.Errorf("processor stopped after %d of %d: %v", n, want, err)
		case <-ctx.Done():
			return Stage{}, ctx.Err()
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			return Stage{}, fmt.Errorf("%d of %d processed after %v", n, want, stageLimit)
		}
	}
}

func (e *env) stateDir(name string) string {
	return filepath.Join(e.dirs, fmt.Sprintf("%02d-%s", e.step.Add(1), name))
}

func (e *env) groupOpts() []group.Opt {
	opts := []group.Opt{group.Storage(e.cfg.Storage)}
	if e.cfg.Flush >= 0 {
		opts = append(opts, group.ProducerFlush(e.cfg.Flush))
	}
	if e.timerEvery > 0 {
		opts = append(opts, group.TimerInterval(e.timerEvery))
	}
	if e.cfg.Storage == statestore.Redis {
		// A namespace per processor start: each stage starts from empty
		// tables, as on a fresh state directory.
		opts = append(opts, group.StorageOptions(statestore.RedisServer(e.redisAddr, fmt.Sprintf("bench-%d", e.step.Add(1)))))
	}
	if e.cfg.RecordCache != 0 {
		opts = append(opts, group.RecordCache(max(e.cfg.RecordCache, 0)))
	}
	return opts
}

// counter is a bare Goka processor: count pings per device in a group table,
// with the same storage, sarama config and hasher as the kit's processors.
func (e *env) counter(ctx context.Context) (Stage, error) {
	sc, err := e.cl.Sarama()
	if err != nil {
		return Stage{}, err
	}
	sb, err := statestore.Builder(e.cfg.Storage, e.stateDir("counter"))
	if err != nil {
		return Stage{}, err
	}
	gg := goka.DefineGroup(counterGroup,
		goka.Input(geofence.TopicPings, new(codec.Bytes), func(c goka.Context, _ any) {
			var n int64
			if v := c.Value(); v != nil {
				n = v.(int64)
			}
			c.SetValue(n + 1)
		}),
		goka.Persist(new(codec.Int64)),
	)
	flush := group.DefaultProducerFlush // as the kit's processors
	if e.cfg.Flush >= 0 {
		flush = e.cfg.Flush
	}
	popts := append(group.GokaClientOptions(sc, flush), goka.WithStorageBuilder(sb), goka.WithLogger(quietGoka{}), topology.GokaProcessorHasher())
	p, err := goka.NewProcessor(e.cl.Brokers, gg, popts...)
	if err != nil {
		return Stage{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	return waitCount(ctx, errc, e.cfg.Pings, func() int { n, _ := processed(p, geofence.TopicPings); return n })
}

// running is a debouncer (and, for the pipeline, occupancy) started on the
// current topics.
type running struct {
	deb    *group.Processor
	occ    occProcs
	cancel context.CancelFunc
	errc   chan error
	wg     errgroup.Group
}

func (r *running) stop() {
	r.cancel()
	_ = r.wg.Wait()
}

func (e *env) start(ctx context.Context, withOccupancy bool) (*running, error) {
	return e.startIn(ctx, withOccupancy, "")
}

// startIn starts the processors with their state under dir ("" a new
// directory per processor) and returns once they are ready (tables recovered).
func (e *env) startIn(ctx context.Context, withOccupancy bool, dir string) (*running, error) {
	stateDir := func(name string) string {
		if dir != "" {
			return dir
		}
		return e.stateDir(name)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, errc: make(chan error, 2)}
	var debP atomic.Pointer[group.Processor]
	var occP occStarted
	r.wg.Go(func() error {
		err := debounce.Run(ctx, host.Env{
			Cluster: e.cl, Topology: e.topo, Log: e.log, Group: append([]group.Opt{group.StateDir(stateDir("debouncer"))}, e.groupOpts()...),
			Started: func(p *group.Processor) { debP.Store(p) },
		}, debounce.Fences(fences.Loaded(e.cat)))
		r.errc <- err
		return err
	})
	if withOccupancy {
		r.wg.Go(func() error {
			err := occupancy.Run(ctx, host.Env{
				Cluster: e.cl, Topology: e.topo, Log: e.log, Group: append([]group.Opt{group.StateDir(stateDir("occupancy"))}, e.groupOpts()...),
				Started: occP.store,
			}, occupancy.Fences(fences.Loaded(e.cat)), occupancy.LagInterval(0))
			r.errc <- err
			return err
		})
	}
	deadline := time.Now().Add(stageLimit)
	for debP.Load() == nil || (withOccupancy && !occP.ok()) {
		select {
		case err := <-r.errc:
			r.stop()
			return nil, fmt.Errorf("processor stopped while starting: %v", err)
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("processors not ready after %v", stageLimit)
		}
	}
	r.deb, r.occ = debP.Load(), occP.load()
	return r, nil
}

func (e *env) debouncer(ctx context.Context) (Stage, error) {
	r, err := e.start(ctx, false)
	if err != nil {
		return Stage{}, err
	}
	defer r.stop()
	return waitCount(ctx, r.errc, e.cfg.Pings, func() int { n, _ := r.deb.Processed(geofence.TopicPings); return n })
}

// occupancyBacklog is how many records on occupancy's inputs its two
// groups have not yet processed: those on the topics, and those emitted
// upstream (by deb when not nil, and by occupancy's members) but not yet
// acknowledged, which end offsets do not show yet.
func (e *env) occupancyBacklog(ctx context.Context, occ occProcs, deb *group.Processor) (int64, error) {
	ends, err := e.adm.ListEndOffsets(ctx, geofence.TopicTriggers, geofence.TopicOccupancyChanges)
	if err != nil {
		return 0, err
	}
	var lag int64
	for topic, p := range map[string]*group.Processor{geofence.TopicTriggers: occ.members, geofence.TopicOccupancyChanges: occ.counts} {
		_, last := p.Processed(topic)
		var perr error
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				perr = o.Err
			}
			if o.Topic != topic {
				return
			}
			done := int64(0)
			if l, ok := last[o.Partition]; ok {
				done = l + 1
			}
			if o.Offset > done {
				lag += o.Offset - done
			}
		})
		if perr != nil {
			return 0, fmt.Errorf("end offsets: %w", perr)
		}
	}
	// Every processed count is read before every emitted count, downstream
	// first: a group counts an input's emits before the input, so the
	// emitted counts include the emits of every input counted processed, and
	// the difference can only overstate what is in flight, never miss it.
	changes, _ := occ.counts.Processed(geofence.TopicOccupancyChanges)
	triggers, _ := occ.members.Processed(geofence.TopicTriggers)
	lag += int64(max(occ.members.Emitted(geofence.TopicOccupancyChanges)-changes, 0))
	if deb != nil {
		lag += int64(max(deb.Emitted(geofence.TopicTriggers)-triggers, 0))
	}
	return lag, nil
}

// pipeline runs debouncer + occupancy over fresh topics, times the pings
// through both, then offers the rate windows.
func (e *env) pipeline(ctx context.Context, res *Result) error {
	if err := e.fresh(ctx); err != nil {
		return err
	}
	r, err := e.start(ctx, true)
	if err != nil {
		return err
	}
	defer r.stop()
	// The pipeline is done when the debouncer has every ping and occupancy
	// has caught up with every trigger they caused.
	var t timer
	deadline := time.Now().Add(stageLimit)
	for {
		n, _ := r.deb.Processed(geofence.TopicPings)
		t.observe(n)
		if n >= e.cfg.Pings {
			lag, err := e.occupancyBacklog(ctx, r.occ, r.deb)
			if err != nil {
				return err
			}
			if lag == 0 {
				res.Pipeline = t.stage(n)
				break
			}
		}
		select {
		case err := <-r.errc:
			return fmt.Errorf("processor stopped: %v", err)
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pipeline not done after %v", stageLimit)
		}
	}
	trig, err := e.adm.ListEndOffsets(ctx, geofence.TopicTriggers)
	if err != nil {
		return err
	}
	res.TriggersPerPing = float64(sumOffsets(trig)) / float64(e.cfg.Pings)
	e.progress("d pipeline: %.0f pings/s, %.3f triggers per ping", res.Pipeline.PingsPerSec, res.TriggersPerPing)

	for i, rate := range e.cfg.Rates {
		rr, err := e.offer(ctx, r, i, rate)
		if err != nil {
			return fmt.Errorf("rate %d/s: %w", rate, err)
		}
		res.Rates = append(res.Rates, rr)
		e.progress("rate %d/s: achieved %.0f/s, ping→trigger p50 %.0f ms p99 %.0f ms, ping→occupancy p50 %.0f ms p99 %.0f ms, backlog debouncer %d occupancy %d",
			rate, rr.Achieved, rr.PingToTrigger.P50, rr.PingToTrigger.P99, rr.PingToOccupancy.P50, rr.PingToOccupancy.P99, rr.DebouncerLag, rr.OccupancyLag)
	}
	return nil
}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Percentiles{N: len(ds), P50: ms(at(0.50)), P99: ms(at(0.99)), Max: ms(ds[len(ds)-1])}
}

type pingKey struct {
	device string
	timeMs int64
}

type fenceKey struct {
	fence  string
	timeMs int64
}

// offer produces window's share of pings at rate per second, watching the
// trigger and occupancy topics for the records they cause.
func (e *env) offer(ctx context.Context, r *running, window, rate int) (Rate, error) {
	first := e.cfg.Pings
	for _, rt := range e.cfg.Rates[:window] {
		first += int(float64(rt) * e.cfg.Window.Seconds())
	}
	n := int(float64(rate) * e.cfg.Window.Seconds())
	pings := e.pings[first : first+n]
	enc := e.encoded[first : first+n]

	var (
		mu        sync.Mutex
		sent      = make(map[pingKey]time.Time, n)
		byFence   = map[fenceKey]time.Time{}
		trigLat   []time.Duration
		occLat    []time.Duration
		seenFence = map[fenceKey]bool{}
		read      int64 // records the tail has read, both topics
	)
	kopts, _ := e.cl.Kgo()
	tail, err := kgo.NewClient(append(kopts,
		kgo.ConsumeTopics(geofence.TopicTriggers, geofence.TopicOccupancy),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond))...)
	if err != nil {
		return Rate{}, err
	}
	defer tail.Close()
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	trigCodec := codecs.For[geofencepb.Trigger]()
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		for tctx.Err() == nil {
			f := tail.PollFetches(tctx)
			now := time.Now()
			mu.Lock()
			read += int64(f.NumRecords())
			f.EachRecord(func(rec *kgo.Record) {
				switch rec.Topic {
				case geofence.TopicTriggers:
					t, err := trigCodec.Unmarshal(rec.Value)
					if err != nil {
						return
					}
					if at, ok := sent[pingKey{t.DeviceId, t.EventTimeMs}]; ok {
						trigLat = append(trigLat, now.Sub(at))
						fk := fenceKey{t.FenceId, t.EventTimeMs}
						if prev, ok := byFence[fk]; !ok || at.Before(prev) {
							byFence[fk] = at
						}
					}
				case geofence.TopicOccupancy:
					o, err := tablecodec.DecodeState[geofencepb.Occupancy](rec.Value)
					if err != nil || o == nil {
						return
					}
					fk := fenceKey{o.FenceId, o.LastChangeMs}
					if at, ok := byFence[fk]; ok && !seenFence[fk] {
						seenFence[fk] = true
						occLat = append(occLat, now.Sub(at))
					}
				}
			})
			mu.Unlock()
		}
	}()

	// Pace in 10 ms slices.
	const slice = 10 * time.Millisecond
	perSlice := max(1, rate/100)
	start := time.Now()
	before, _ := r.deb.Processed(geofence.TopicPings)
	for i := 0; i < n; {
		end := min(n, i+perSlice)
		now := time.Now()
		mu.Lock()
		for j := i; j < end; j++ {
			sent[pingKey{pings[j].DeviceId, pings[j].DeviceTimeMs}] = now
		}
		mu.Unlock()
		for j := i; j < end; j++ {
			e.kc.Produce(ctx, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(pings[j].DeviceId), Value: enc[j]}, nil)
		}
		i = end
		next := start.Add(time.Duration(i/perSlice) * slice)
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return Rate{}, ctx.Err()
			}
		}
	}
	offered := time.Since(start)
	if err := e.kc.Flush(ctx); err != nil {
		return Rate{}, err
	}
	out := Rate{Offered: rate, Achieved: float64(n) / offered.Seconds()}
	after, _ := r.deb.Processed(geofence.TopicPings)
	out.DebouncerLag = int64(n - (after - before))
	if out.OccupancyLag, err = e.occupancyBacklog(ctx, r.occ, r.deb); err != nil {
		return Rate{}, err
	}
	// Drain before the next window, so windows do not share a backlog.
	deadline := time.Now().Add(60 * time.Second)
	for {
		done, _ := r.deb.Processed(geofence.TopicPings)
		lag, err := e.occupancyBacklog(ctx, r.occ, r.deb)
		if err != nil {
			return Rate{}, err
		}
		if done-before >= n && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			return Rate{}, fmt.Errorf("backlog not drained 60 s after the window (debouncer %d, occupancy %d)", n-(done-before), lag)
		}
		time.Sleep(poll) // polling local stats, bounded by the deadline
	}
	// Let the tail read every output of the drained window.
	ends, err := e.adm.ListEndOffsets(ctx, geofence.TopicTriggers, geofence.TopicOccupancy)
	if err != nil {
		return Rate{}, err
	}
	want := sumOffsets(ends)
	for {
		mu.Lock()
		got := read
		mu.Unlock()
		if got >= want {
			break
		}
		if time.Now().After(deadline) {
			return Rate{}, fmt.Errorf("output tail read %d of %d records", got, want)
		}
		time.Sleep(poll) // polling the tail's progress, bounded by the deadline
	}
	tcancel()
	<-tailDone
	mu.Lock()
	defer mu.Unlock()
	out.PingToTrigger = percentiles(trigLat)
	out.PingToOccupancy = percentiles(occLat)
	return out, nil
}

func sumOffsets(l kadm.ListedOffsets) int64 {
	var n int64
	l.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// quietGoka discards Goka's log lines.
type quietGoka struct{}

func (quietGoka) Print(...any)          {}
func (quietGoka) Println(...any)        {}
func (quietGoka) Printf(string, ...any) {}

// occProcs are occupancy's two processors.
type occProcs struct{ members, counts *group.Processor }

// occStarted collects occupancy's processors as host.Env.Started reports
// them.
type occStarted struct {
	members, counts atomic.Pointer[group.Processor]
}

func (o *occStarted) store(p *group.Processor) {
	if p.Group() == geofence.GroupOccupancy {
		o.counts.Store(p)
		return
	}
	o.members.Store(p)
}

func (o *occStarted) ok() bool { return o.members.Load() != nil && o.counts.Load() != nil }

func (o *occStarted) load() occProcs { return occProcs{o.members.Load(), o.counts.Load()} }
