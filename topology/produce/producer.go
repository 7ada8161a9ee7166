package produce

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/hotkeypb"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// HeaderSaltedFrom is the record header carrying the original key of a
// record sent under a salted key (key#n).
const HeaderSaltedFrom = "fencestream-salted-from"

// ErrClosed is returned by Emit and EmitAsync after Close.
var ErrClosed = errors.New("produce: producer is closed")

// Producer writes messages *M to one declared topic, enforcing fencestream's
// key rules. It is safe for concurrent use.
type Producer[M any, P codecs.Message[M]] struct {
	topic    topology.Topic
	cfg      config
	metrics  *metrics
	hlcField protoreflect.FieldDescriptor // nil: the message has no hlc field

	emitter    *goka.Emitter
	hotEmitter *goka.Emitter // default hot-key recorder; nil when replaced

	// mu orders stamping and hand-over to the client, so stamps reach each
	// partition in increasing order, and guards hot and closed.
	mu     sync.Mutex
	hot    *hotKeys
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// New connects a producer of *M to topic. The topic should come from a
// topology.Topology whose Ensure has run: New does not create topics.
func New[M any, P codecs.Message[M]](cl cluster.Config, topic topology.Topic, opts ...Opt) (*Producer[M, P], error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, fmt.Errorf("produce: metrics: %w", err)
	}
	if topic.Name == "" || topic.Partitions <= 0 {
		return nil, fmt.Errorf("produce: topic %q is not a declared topic (partitions %d)", topic.Name, topic.Partitions)
	}
	desc := P(new(M)).ProtoReflect().Descriptor()
	if topic.Value != "" && topic.Value != string(desc.FullName()) {
		return nil, fmt.Errorf("produce: topic %s carries %s, not %s", topic.Name, topic.Value, desc.FullName())
	}
	p := &Producer[M, P]{
		topic:   topic,
		cfg:     cfg,
		metrics: m,
		hot:     newHotKeys(topic.Name, topic.Salting, cfg.keyLimit, cfg.hot),
	}
	if fd := desc.Fields().ByName("hlc"); fd != nil && fd.Kind() == protoreflect.Uint64Kind && fd.Cardinality() != protoreflect.Repeated {
		p.hlcField = fd
	}

	saramaCfg, err := cl.Sarama()
	if err != nil {
		return nil, fmt.Errorf("produce: cluster settings: %w", err)
	}
	// One request in flight per broker: a retried batch cannot overtake the
	// next one, so per-key order (and HLC order) survives retries.
	saramaCfg.Net.MaxOpenRequests = 1
	if cfg.lingerSet {
		saramaCfg.Producer.Flush.Frequency = cfg.linger
		if cfg.linger == 0 {
			// sarama waits for a size threshold when one is set and the
			// frequency is zero; with none set it sends right away.
			saramaCfg.Producer.Flush.Bytes, saramaCfg.Producer.Flush.Messages = 0, 0
		}
	}
	clientID := cl.ClientID
	if clientID == "" {
		clientID = "fencestream-producer-" + topic.Name
	}
	if err := checkPartitions(cl.Brokers, saramaCfg, topic); err != nil {
		return nil, err
	}
	saramaCfg = rideOutOutages(saramaCfg)
	tmCfg := goka.NewTopicManagerConfig()
	tmCfg.MismatchBehavior = goka.TMConfigMismatchBehaviorFail
	tmCfg.NoCreate = true // topics are created by topology.Ensure only
	shared := &sharedProducer{build: func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		// A copy per producer: Goka's builder writes ClientID and the
		// partitioner into the config it is given, which live clients read.
		c := *saramaCfg
		return goka.ProducerBuilderWithConfig(&c)(brokers, clientID, hasher)
	}}
	emitterOpts := []goka.EmitterOption{
		topology.GokaEmitterHasher(),
		goka.WithEmitterProducerBuilder(shared.builder),
		goka.WithEmitterTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(saramaCfg, tmCfg)),
		goka.WithEmitterClientID(clientID),
	}
	p.emitter, err = goka.NewEmitter(cl.Brokers, goka.Stream(topic.Name), codecs.For[M, P](), emitterOpts...)
	if err != nil {
		return nil, fmt.Errorf("produce: emitter for %s: %w", topic.Name, err)
	}
	if !cfg.recorderSet && p.hot != nil {
		p.hotEmitter, err = goka.NewEmitter(cl.Brokers, goka.Stream(topology.TopicHotKeys), codecs.For[pb.HotKey](), emitterOpts...)
		if err != nil {
			_ = p.emitter.Finish()
			return nil, fmt.Errorf("produce: emitter for %s: %w", topology.TopicHotKeys, err)
		}
		p.cfg.recorder = p.recordToTopic
	}
	return p, nil
}

// DeliveryRetries is how often a record is retried while its broker is
// unreachable before its delivery fails (about one per second after the
// first few; see New).
const DeliveryRetries = 1000

// rideOutOutages is a copy of sc whose producer waits for a broker that went
// away for a while (a restart, a rolling upgrade) instead of failing the send:
// sarama's defaults give up after 3 retries 100 ms apart, and a batch whose
// connection broke fails at once when the leader cannot be looked up, so
// both the record and the metadata are retried, 100 ms doubling to 1 s apart,
// up to DeliveryRetries times (about 16 minutes), in order (one request in
// flight). Only for sending: the start-up check fails fast.
func rideOutOutages(sc *sarama.Config) *sarama.Config {
	c := *sc
	backoff := func(retries, _ int) time.Duration { return min(100*time.Millisecond<<min(retries, 4), time.Second) }
	c.Producer.Retry.Max, c.Producer.Retry.BackoffFunc = DeliveryRetries, backoff
	c.Metadata.Retry.Max, c.Metadata.Retry.BackoffFunc = DeliveryRetries, backoff
	return &c
}

// Topic is the declared topic this producer writes to.
func (p *Producer[M, P]) Topic() topology.Topic { return p.topic }

// Emit sends msg under key and waits until the broker has it, or ctx ends
// (then the record may still be delivered). A refused key returns a
// *topology.KeyError and sends nothing. msg's hlc field, if it has one, is
// set to the stamp it was sent with. A nil msg is a tombstone (deletes the
// key on a compacted topic); tombstones are never salted.
func (p *Producer[M, P]) Emit(ctx context.Context, key string, msg P) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := p.emit(key, msg)
	if err != nil {
		return err
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// EmitAsync hands msg to the client and returns at once. err is an immediate
// refusal (a *topology.KeyError, ErrClosed, an encoding error): nothing was
// sent. Otherwise wait blocks until the broker has the record and returns the
// delivery error, if any; it may be called more than once.
func (p *Producer[M, P]) EmitAsync(key string, msg P) (wait func() error, err error) {
	r, err := p.emit(key, msg)
	if err != nil {
		return nil, err
	}
	return func() error { <-r.done; return r.err }, nil
}

type result struct {
	done chan struct{}
	err  error
}

func (p *Producer[M, P]) emit(key string, msg P) (*result, error) {
	if err := topology.ValidateKey(key, p.cfg.keyLimit); err != nil {
		var ke *topology.KeyError
		if errors.As(err, &ke) {
			ke.Topic = p.topic.Name
		}
		p.metrics.rejectedKeys.WithLabelValues(p.topic.Name, rejectReason(err)).Inc()
		return nil, err
	}
	var value any // untyped nil: a tombstone
	if msg != nil {
		value = msg
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	target, decision := key, (*pb.HotKey)(nil)
	if value != nil {
		target, decision = p.hot.observe(key)
	}
	if value != nil && p.hlcField != nil {
		msg.ProtoReflect().Set(p.hlcField, protoreflect.ValueOfUint64(p.cfg.clock.Now()))
	}
	var headers goka.Headers
	if target != key {
		headers = goka.Headers{HeaderSaltedFrom: []byte(key)}
	}
	promise, err := p.emitter.EmitWithHeaders(target, value, headers)
	p.mu.Unlock()

	if decision != nil {
		p.decided(decision)
	}
	if err != nil {
		p.metrics.errors.WithLabelValues(p.topic.Name).Inc()
		return nil, fmt.Errorf("produce %s: %w", p.topic.Name, err)
	}
	r := &result{done: make(chan struct{})}
	promise.Then(func(err error) {
		if err != nil {
			p.metrics.errors.WithLabelValues(p.topic.Name).Inc()
			r.err = fmt.Errorf("produce %s key %q: %w", p.topic.Name, target, err)
		} else {
			p.metrics.records.WithLabelValues(p.topic.Name).Inc()
		}
		close(r.done)
	})
	return r, nil
}

// decided counts, logs and records a hot-key decision.
func (p *Producer[M, P]) decided(d *pb.HotKey) {
	if d.GetSalted() {
		p.metrics.hotKeys.WithLabelValues(p.topic.Name, DecisionSalted).Inc()
		p.cfg.logger.Warn("hot key salted: its per-key order is gone", "topic", d.GetTopic(), "key", d.GetKey(),
			"rate_per_s", d.GetRatePerS(), "salt_buckets", d.GetSaltBuckets())
	} else {
		p.metrics.hotKeys.WithLabelValues(p.topic.Name, DecisionReported).Inc()
		p.cfg.logger.Warn("hot key reported, not salted: the topic requires per-key order", "topic", d.GetTopic(), "key", d.GetKey(),
			"rate_per_s", d.GetRatePerS())
	}
	if p.cfg.recorder != nil {
		p.cfg.recorder(d)
	}
}

// recordToTopic is the default recorder: the compacted hot-keys topic, key
// "<topic>/<key>".
func (p *Producer[M, P]) recordToTopic(d *pb.HotKey) {
	key := d.GetTopic() + "/" + d.GetKey()
	promise, err := p.hotEmitter.Emit(key, d)
	if err != nil {
		p.cfg.logger.Error("recording hot key", "topic", topology.TopicHotKeys, "key", key, "err", err)
		return
	}
	promise.Then(func(err error) {
		if err != nil {
			p.cfg.logger.Error("recording hot key", "topic", topology.TopicHotKeys, "key", key, "err", err)
		}
	})
}

// Close waits for records in flight and closes the connection. Emits after
// Close return ErrClosed. It is safe to call more than once.
func (p *Producer[M, P]) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		done := make(chan error, 1)
		go func() {
			err := p.emitter.Finish()
			if p.hotEmitter != nil {
				err = errors.Join(err, p.hotEmitter.Finish())
			}
			done <- err
		}()
		select {
		case p.closeErr = <-done:
		case <-time.After(p.cfg.closeWait):
			p.closeErr = fmt.Errorf("produce: %s: records still unacknowledged after %v; giving up on them", p.topic.Name, p.cfg.closeWait)
		}
	})
	return p.closeErr
}

// sharedProducer lets the record emitter and the hot-key emitter share one
// sarama producer (one set of connections); the last Close closes it.
type sharedProducer struct {
	build goka.ProducerBuilder

	mu   sync.Mutex
	prod goka.Producer
	refs int
}

func (s *sharedProducer) builder(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prod == nil {
		prod, err := s.build(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		s.prod = prod
	}
	s.refs++
	return &sharedRef{s: s}, nil
}

type sharedRef struct {
	s    *sharedProducer
	once sync.Once
}

func (r *sharedRef) Emit(topic, key string, value []byte) *goka.Promise {
	return r.s.prod.Emit(topic, key, value)
}

func (r *sharedRef) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	return r.s.prod.EmitWithHeaders(topic, key, value, headers)
}

func (r *sharedRef) Close() error {
	var err error
	r.once.Do(func() {
		r.s.mu.Lock()
		defer r.s.mu.Unlock()
		r.s.refs--
		if r.s.refs == 0 {
			err = r.s.prod.Close()
		}
	})
	return err
}

var _ goka.Producer = (*sharedRef)(nil)

// checkPartitions refuses a topic whose partition count on the broker differs
// from its declaration: every key would be hashed modulo the wrong number.
func checkPartitions(brokers []string, sc *sarama.Config, topic topology.Topic) error {
	client, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return fmt.Errorf("produce: connecting to %v: %w", brokers, err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic.Name)
	if err != nil {
		return fmt.Errorf("produce: %w", &topology.MismatchError{Topic: topic.Name, Setting: "missing", Declared: strconv.Itoa(int(topic.Partitions))})
	}
	if got := len(parts); got != int(topic.Partitions) {
		return fmt.Errorf("produce: %w", &topology.MismatchError{Topic: topic.Name, Setting: "partitions", Declared: strconv.Itoa(int(topic.Partitions)), Actual: strconv.Itoa(got)})
	}
	return nil
}
