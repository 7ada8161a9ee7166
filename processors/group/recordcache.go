package group

import (
	"context"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/collector"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// The record cache (RecordCache, CommitInterval): Kafka Streams'
// cache.max.bytes.buffering and commit.interval.ms. A callback's table write
// goes to a per-processor cache of encoded envelopes instead of the store and
// the changelog; every CommitInterval (and when the dirty bytes pass the
// budget) the cache writes each dirty key's latest value once: to the
// changelog with the kit's own producer, then, acknowledged, to the
// partition's store (with the changelog offset, as Goka's own writes record
// it). A hot key updated N times in an interval costs one store write and
// one changelog record.
//
// Invariant: an input's offset is handed to sarama (and so committed) only
// after every table write made before it was marked is in the changelog and
// the store. The kit's consumer group (inorder.go) passes the in-order marks
// through a markGate, which holds them; a flush first takes the held marks,
// then writes every key dirty at that moment (a superset of what those
// inputs changed: Goka marks an input only after its callback returned), and
// hands the marks over only once the writes are acknowledged. A crash or a
// lost partition before that drops the cache's dirty values and the held
// marks together; the inputs are redelivered and run again on the stored
// envelope that did not see them, so they are new to it and emit what they
// emitted before, byte for byte (the argument of once.Deferred): their
// outputs may appear twice, as any replay's do, never a state change.
//
// Why not Goka's SetValue: Goka writes a key's value only from that key's
// own callback, so coalescing through it would need a record per flushed key
// through a topic (a round trip per key per interval, the cost the cache is
// there to save). The kit already owns the stores (its storage builders wrap
// them) and the in-order marks, so it writes both itself.

// DefaultCommitInterval is how often the record cache flushes by default: a
// bound on how long a table write and its input's offset commit wait, well
// under the 100 ms the pipeline's ping → occupancy p99 allows.
const DefaultCommitInterval = 50 * time.Millisecond

// DefaultRecordCache is the record cache's budget by default: 16 MiB per
// processor, what the bench measured the cache's gain with (BENCHMARKS.md).
// RecordCache(0) turns it off (every callback writes its key's value through
// Goka).
const DefaultRecordCache = 16 << 20

// RecordCache keeps up to bytes of dirty table values (encoded envelopes) in
// memory and writes each key once per CommitInterval (default
// DefaultRecordCache, 16 MiB; 0 is off). Ignored with Tester, which commits
// nothing: there every write goes through Goka at once.
func RecordCache(bytes int) Opt {
	return runOpt("RecordCache", func(c *config) { c.cache.bytes = bytes })
}

// CommitInterval sets how often the record cache flushes dirty values and
// releases the input offsets they cover (default DefaultCommitInterval).
func CommitInterval(d time.Duration) Opt {
	return runOpt("CommitInterval", func(c *config) { c.cache.every = d })
}

type cacheConfig struct {
	bytes int
	every time.Duration
}

func (c cacheConfig) validate() []error {
	var errs []error
	if c.bytes < 0 {
		errs = append(errs, fmt.Errorf("RecordCache: must not be negative, got %d", c.bytes))
	}
	if c.every <= 0 {
		errs = append(errs, fmt.Errorf("CommitInterval: must be positive, got %s", c.every))
	}
	return errs
}

// rcEntry is one key's cached value. b is its encoding (nil: deleted); env
// its decoded envelope, nil when a callback that took it failed half-way
// (decoded from b again on the next take).
type rcEntry struct {
	env     *kitpb.Envelope
	st      any
	b       []byte
	deleted bool
	dirty   bool
	ver     uint64 // bumped by every write, so a flush knows what it wrote
}

type recordCache struct {
	mu     sync.Mutex
	budget int
	used   int // bytes of encodings held
	dirty  int // bytes of dirty encodings
	ver    uint64
	parts  map[int32]map[string]*rcEntry
	stores map[int32]storage.Storage

	table, group string
	every        time.Duration
	gate         *markGate
	newProducer  func() (sarama.SyncProducer, error)
	prod         sarama.SyncProducer
	flushMu      sync.Mutex // one flush at a time; a partition is dropped between flushes
	kick         chan struct{}
	m            *cacheMetrics
	hits, misses prometheus.Counter // m's, of this group (a record pays no label lookup)
	log          *slog.Logger
}

func newRecordCache(cfg cacheConfig, table, group string, m *cacheMetrics, log *slog.Logger) *recordCache {
	c := &recordCache{budget: cfg.bytes, every: cfg.every, parts: map[int32]map[string]*rcEntry{},
		stores: map[int32]storage.Storage{}, table: table, group: group, kick: make(chan struct{}, 1), m: m, log: log}
	c.hits, c.misses = m.hits.WithLabelValues(group), m.misses.WithLabelValues(group)
	c.gate = &markGate{held: map[gateKey]int64{}, flush: c.flush}
	return c
}

// take returns the key's cached envelope and decoded state; ok false when
// the cache has nothing of the key (read the store). A deleted key is ok
// with a nil envelope: the store still holds the old value.
func (c *recordCache) take(p int32, key string) (env *kitpb.Envelope, st any, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.parts[p][key]
	if e == nil {
		c.misses.Inc()
		return nil, nil, false
	}
	c.hits.Inc()
	if e.deleted {
		return nil, nil, true
	}
	if e.env == nil {
		env, err := decodeEnvelope(e.b)
		if err != nil { // cannot be: the kit encoded it
			return nil, nil, false
		}
		e.env = env
	}
	// The callback may change env in place; until it puts or returns it,
	// the entry has no decoded value (b is what a flush writes).
	env, st, e.env, e.st = e.env, e.st, nil, nil
	return env, st, true
}

// untake hands back an envelope take returned that the callback did not
// change.
func (c *recordCache) untake(p int32, key string, env *kitpb.Envelope, st any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.parts[p][key]; e != nil && !e.deleted && e.env == nil {
		e.env, e.st = env, st
	}
}

// put stores a callback's write of the key: b is env encoded.
func (c *recordCache) put(p int32, key string, env *kitpb.Envelope, b []byte, st any) {
	c.write(p, key, &rcEntry{env: env, st: st, b: b})
}

// del stores a callback's delete of the key.
func (c *recordCache) del(p int32, key string) { c.write(p, key, &rcEntry{deleted: true}) }

func (c *recordCache) write(p int32, key string, n *rcEntry) {
	c.mu.Lock()
	part := c.parts[p]
	if part == nil {
		part = map[string]*rcEntry{}
		c.parts[p] = part
	}
	if old := part[key]; old != nil {
		c.used -= len(old.b)
		if old.dirty {
			c.dirty -= len(old.b)
		}
	}
	c.ver++
	n.dirty, n.ver = true, c.ver
	part[key] = n
	c.used += len(n.b)
	c.dirty += len(n.b)
	over := c.dirty > c.budget
	if c.used > c.budget {
		c.evictClean()
	}
	c.mu.Unlock()
	if over {
		c.flushSoon()
	}
}

// flushSoon has the flusher flush now rather than at the interval's end.
func (c *recordCache) flushSoon() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// evictClean drops clean entries (the store holds them) until the cache is
// within its budget; dirty ones wait for the flush the write kicked.
func (c *recordCache) evictClean() {
	for _, part := range c.parts {
		for k, e := range part {
			if c.used <= c.budget {
				return
			}
			if !e.dirty {
				delete(part, k)
				c.used -= len(e.b)
				c.m.evictions.WithLabelValues(c.group).Inc()
			}
		}
	}
}

// storageBuilder wraps the group table's stores (outermost: a flush writes
// through every other wrapper, as Goka's own writes do).
func (c *recordCache) storageBuilder(inner storage.Builder) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		st, err := inner(topic, partition)
		if err != nil {
			return nil, err
		}
		c.dropPartition(partition)
		c.mu.Lock()
		c.stores[partition] = st
		c.mu.Unlock()
		return &rcStorage{Storage: st, c: c, p: partition}, nil
	}
}

type rcStorage struct {
	storage.Storage
	c *recordCache
	p int32
}

func (s *rcStorage) Close() error {
	s.c.dropPartition(s.p)
	return s.Storage.Close()
}

// dropPartition forgets a partition's values, dirty ones too, with the marks
// held for its inputs: nothing of them was committed, so they are redelivered
// (to whichever instance owns the partition next) and applied again to the
// store, which never saw them.
func (c *recordCache) dropPartition(p int32) {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	for _, e := range c.parts[p] {
		c.used -= len(e.b)
		if e.dirty {
			c.dirty -= len(e.b)
		}
	}
	delete(c.parts, p)
	delete(c.stores, p)
	c.mu.Unlock()
	c.gate.dropPartition(p)
}

type flushItem struct {
	p       int32
	key     string
	b       []byte
	deleted bool
	ver     uint64
}

// flush writes every dirty value and then hands over the marks held before
// it began. On a failed produce the values stay dirty and the marks held.
func (c *recordCache) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	marks := c.gate.take()
	c.mu.Lock()
	var items []flushItem
	for p, part := range c.parts {
		for k, e := range part {
			if e.dirty {
				items = append(items, flushItem{p: p, key: k, b: e.b, deleted: e.deleted, ver: e.ver})
			}
		}
	}
	c.mu.Unlock()
	if len(items) == 0 {
		c.gate.forward(marks)
		return
	}
	start := time.Now()
	if err := c.write1(items); err != nil {
		c.log.Warn("record cache: flush failed; values stay dirty and offsets uncommitted", "err", err, "keys", len(items))
		c.gate.restore(marks)
		return
	}
	c.mu.Lock()
	for _, it := range items {
		part := c.parts[it.p]
		e := part[it.key]
		if e == nil || e.ver != it.ver {
			continue // written again meanwhile: the next flush writes it
		}
		e.dirty = false
		c.dirty -= len(e.b)
		if e.deleted {
			delete(part, it.key)
		}
	}
	c.mu.Unlock()
	c.gate.forward(marks)
	c.m.flushedKeys.WithLabelValues(c.group).Add(float64(len(items)))
	c.m.flushSeconds.WithLabelValues(c.group).Observe(time.Since(start).Seconds())
}

// write1 produces items to the changelog, waits for every acknowledgement,
// then writes them to their stores with the changelog offset.
func (c *recordCache) write1(items []flushItem) error {
	if c.prod == nil {
		p, err := c.newProducer()
		if err != nil {
			return err
		}
		c.prod = p
	}
	msgs := make([]*sarama.ProducerMessage, len(items))
	for i, it := range items {
		m := &sarama.ProducerMessage{Topic: c.table, Partition: it.p, Key: sarama.StringEncoder(it.key)}
		if !it.deleted {
			m.Value = sarama.ByteEncoder(it.b)
		}
		msgs[i] = m
	}
	if err := c.prod.SendMessages(msgs); err != nil {
		// A sarama producer whose sends failed (the cluster was away) can go
		// on failing after the cluster is back, and the cache would then
		// never flush nor commit again: the next flush starts a new one.
		_ = c.prod.Close()
		c.prod = nil
		return err
	}
	last := map[int32]int64{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, it := range items {
		st := c.stores[it.p]
		if st == nil {
			continue // dropped meanwhile cannot be: dropPartition waits for the flush
		}
		var err error
		if it.deleted {
			err = st.Delete(it.key)
		} else {
			err = st.Set(it.key, it.b)
		}
		if err != nil {
			return fmt.Errorf("record cache: writing %s/%d: %w", c.table, it.p, err)
		}
		last[it.p] = max(last[it.p], msgs[i].Offset)
	}
	for p, off := range last {
		if err := c.stores[p].SetOffset(off); err != nil {
			return fmt.Errorf("record cache: offset of %s/%d: %w", c.table, p, err)
		}
	}
	return nil
}

// run flushes every interval (and when kicked) until ctx ends, then once
// more.
func (c *recordCache) run(ctx context.Context) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	defer func() {
		c.flush()
		if c.prod != nil {
			_ = c.prod.Close()
			c.prod = nil
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		c.flush()
	}
}

// markGate holds the in-order marks of the sessions of a processor with a
// record cache until a flush has written what the marked inputs changed.
type markGate struct {
	mu    sync.Mutex
	held  map[gateKey]int64
	ended map[sarama.ConsumerGroupSession]bool
	flush func()
}

// topicPart is an input partition a held mark is for.
type topicPart struct {
	topic string
	part  int32
}

type gateKey struct {
	sess sarama.ConsumerGroupSession
	tp   topicPart
}

func (g *markGate) Hold(s sarama.ConsumerGroupSession, topic string, part int32, next int64) {
	g.mu.Lock()
	k := gateKey{s, topicPart{topic, part}}
	g.held[k] = max(g.held[k], next)
	g.mu.Unlock()
}

// Flush stores what the cache holds (before a session's Cleanup).
func (g *markGate) Flush() { g.flush() }

func (g *markGate) take() map[gateKey]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.held
	g.held = map[gateKey]int64{}
	return m
}

// restore puts back marks a failed flush took.
func (g *markGate) restore(m map[gateKey]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range m {
		g.held[k] = max(g.held[k], v)
	}
}

// forward hands marks to their sessions (none to a session that ended: its
// inputs are redelivered).
func (g *markGate) forward(m map[gateKey]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range m {
		if !g.ended[k.sess] {
			k.sess.MarkOffset(k.tp.topic, k.tp.part, v, "")
		}
	}
}

func (g *markGate) dropPartition(p int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.held {
		if k.tp.part == p {
			delete(g.held, k)
		}
	}
}

// End forgets a session's held marks once it ended.
func (g *markGate) End(s sarama.ConsumerGroupSession) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended == nil {
		g.ended = map[sarama.ConsumerGroupSession]bool{}
	}
	g.ended[s] = true
	for k := range g.held {
		if k.sess == s {
			delete(g.held, k)
		}
	}
}

type cacheMetrics struct {
	hits, misses, evictions, flushedKeys *prometheus.CounterVec
	flushSeconds                         *prometheus.HistogramVec
}

func newCacheMetrics(reg prometheus.Registerer) (*cacheMetrics, error) {
	m := &cacheMetrics{
		hits:        counterVec("fencestream_record_cache_hits_total", "Callbacks that found their key's value in the record cache.", "group"),
		misses:      counterVec("fencestream_record_cache_misses_total", "Callbacks that read their key's value from the store (record cache on).", "group"),
		evictions:   counterVec("fencestream_record_cache_evictions_total", "Clean values dropped from the record cache for its budget.", "group"),
		flushedKeys: counterVec("fencestream_record_cache_flushed_keys_total", "Keys the record cache wrote to the store and the changelog.", "group"),
		flushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fencestream_record_cache_flush_seconds",
			Help: "Time of one record cache flush (changelog acknowledgements and store writes).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"group"}),
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.hits, &m.misses, &m.evictions, &m.flushedKeys} {
		if *c, err = collector.Register(reg, *c); err != nil {
			return nil, err
		}
	}
	if m.flushSeconds, err = collector.Register(reg, m.flushSeconds); err != nil {
		return nil, err
	}
	return m, nil
}

// recordCache builds the build's record cache (nil when RecordCache is off)
// and hands it to the callbacks.
func (in *instance[S, PS]) recordCache(cfg *config, sc *sarama.Config, brokers []string, log *slog.Logger) (*recordCache, error) {
	if cfg.cache.bytes <= 0 {
		return nil, nil
	}
	m, err := newCacheMetrics(cfg.registerer)
	if err != nil {
		return nil, err
	}
	table := string(goka.GroupTable(goka.Group(in.name)))
	c := newRecordCache(cfg.cache, table, in.name, m, log)
	pc := cfg.producerConfig(sc) // a copy of sc: this producer keeps its own
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	pc.Producer.Return.Successes, pc.Producer.Return.Errors = true, true
	c.newProducer = func() (sarama.SyncProducer, error) { return sarama.NewSyncProducer(brokers, pc) }
	// A key waiting for the commit (record.awaitRoom) waits for marks the
	// cache holds: it flushes at once rather than at the interval's end.
	hurry := in.rt.hurry
	in.rt.hurry = func() func() {
		c.flushSoon()
		if hurry == nil {
			return func() {}
		}
		return hurry()
	}
	in.rc = c
	return c, nil
}

// fromCache reads the key's envelope from the record cache, and reports
// whether the cache had the key.
func (r *record[S, PS]) fromCache() bool {
	rc := r.c.grp.rc
	if rc == nil {
		return false
	}
	env, st, ok := rc.take(r.c.Partition(), r.c.Key())
	if !ok {
		return false
	}
	r.env, r.cached = env, true
	r.heldSt, _ = st.(PS)
	return true
}

// cacheWrite stores env in the record cache instead of the store, and
// reports whether it did (false: the cache is off).
func (r *record[S, PS]) cacheWrite(env *kitpb.Envelope) bool {
	rc := r.c.grp.rc
	if rc == nil {
		return false
	}
	b, err := encodeEnvelope(env)
	if err != nil {
		r.c.g.Fail(fmt.Errorf("group %s: encoding the envelope of %q: %w", r.c.grp.name, r.c.Key(), err))
		return true
	}
	var st any
	if r.c.grp.cacheStates && r.dirty && !r.deleted {
		st = r.st
	}
	rc.put(r.c.Partition(), r.c.Key(), env, b, st)
	r.cacheWrote = true
	return true
}

// cacheDelete deletes the key in the record cache, and reports whether it
// did (false: the cache is off).
func (r *record[S, PS]) cacheDelete() bool {
	rc := r.c.grp.rc
	if rc == nil {
		return false
	}
	rc.del(r.c.Partition(), r.c.Key())
	r.cacheWrote = true
	return true
}

// releaseCached hands an envelope the record cache lent back to it
// unchanged, and reports whether the record cache had or took the key (then
// the envelope cache must not keep it: the store lags).
func (r *record[S, PS]) releaseCached() bool {
	g := r.c.grp
	if g.rc == nil || !(r.cached || r.cacheWrote) {
		return false
	}
	p, key := r.c.Partition(), r.c.Key()
	if r.held != nil {
		g.envs.forget(p, key, r.held)
	}
	untouched := r.env == r.loaded && r.deferredOn == 0 && !r.touched && !r.dirty && !r.timersDirty
	if r.cached && !r.cacheWrote && untouched && r.env != nil {
		var st any
		if g.cacheStates && r.heldSt != nil {
			st = r.heldSt
		}
		g.rc.untake(p, key, r.env, st)
	}
	return true
}
