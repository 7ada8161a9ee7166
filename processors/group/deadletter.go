package group

import (
	"context"
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// deadLetterErrorBytes bounds the error header (an error may quote the key,
// as topology.KeyError does for invalid UTF-8).
const deadLetterErrorBytes = 1 << 10

// Sizes the dead-letter limit is worked out from.
const (
	// kafkaMaxMessageBytes is Kafka's default max.message.bytes (and
	// kfake's), assumed when the dead-letter topic's cannot be read.
	kafkaMaxMessageBytes = 1_048_588
	// batchOverhead is the v2 record batch header, which a broker counts
	// against max.message.bytes besides the records.
	batchOverhead = 61
	// recordOverhead and headerOverhead are what sarama adds to a record's
	// key, value and header bytes when it checks Producer.MaxMessageBytes
	// (ProducerMessage.ByteSize, v2: the most its varints can take).
	recordOverhead = 5*5 + 10 + 1
	headerOverhead = 2 * 5
)

// recordBytes is the size sarama checks a dead letter against
// Producer.MaxMessageBytes with; it is at least its size in a batch.
func recordBytes(key string, value []byte, headers []*kitpb.Header) int {
	n := recordOverhead + len(key) + len(value)
	for _, h := range headers {
		n += len(h.GetKey()) + len(h.GetValue()) + headerOverhead
	}
	return n
}

// deadLetterLimit is the largest dead letter (recordBytes) that both the
// producer (its MaxMessageBytes) and the dead-letter topic (its
// max.message.bytes, of which a batch header takes its share) accept.
func deadLetterLimit(producerMax, topicMax int) int {
	return min(producerMax, topicMax-batchOverhead)
}

// recordedLimit is the largest dead letter a stream callback records whole
// in its key's envelope: the envelope holds the state and up to window
// inputs' outputs in one table value, which must fit its changelog topic as
// a dead letter fits its own; half of it is left to the state and the
// other outputs.
func recordedLimit(limit, window int) int { return limit / (2 * max(window, 1)) }

// fit is the dead letter o when it is at most limit bytes (recordBytes),
// otherwise o cut down: bounded prefixes of key and value, its headers, and
// the cut-down headers with the original sizes.
func fit(o *kitpb.Output, limit int) (*kitpb.Output, bool) {
	if recordBytes(o.GetKey(), o.GetValue(), o.GetHeaders()) <= limit {
		return o, false
	}
	return cutDown(o.GetTopic(), o.GetKey(), o.GetValue(), o.GetHeaders()), true
}

// cutDown is the dead letter of key and value cut down (see deadletter.HeaderCutDown).
func cutDown(topic, key string, value []byte, headers []*kitpb.Header) *kitpb.Output {
	hs := make([]*kitpb.Header, 0, len(headers)+3)
	for _, h := range headers {
		switch h.GetKey() {
		case deadletter.HeaderCutDown, deadletter.HeaderKeyBytes, deadletter.HeaderValueBytes:
			continue
		case deadletter.HeaderError:
			h = &kitpb.Header{Key: h.GetKey(), Value: []byte(prefix(string(h.GetValue()), deadLetterErrorBytes))}
		default:
			if len(h.GetValue()) > deadLetterErrorBytes { // a foreign header: the kit's are small
				h = &kitpb.Header{Key: h.GetKey(), Value: []byte(prefix(string(h.GetValue()), deadLetterErrorBytes))}
			}
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		&kitpb.Header{Key: deadletter.HeaderCutDown, Value: []byte("true")},
		&kitpb.Header{Key: deadletter.HeaderKeyBytes, Value: []byte(strconv.Itoa(len(key)))},
		&kitpb.Header{Key: deadletter.HeaderValueBytes, Value: []byte(strconv.Itoa(len(value)))},
	)
	return &kitpb.Output{Topic: topic, Key: prefix(key, deadletter.CutKeyBytes), Value: value[:min(len(value), deadletter.CutValueBytes)], Headers: hs}
}

// prefix is the first n bytes of s at most, cut at the start of a rune (a
// key's prefix stays valid UTF-8 when the key was).
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for back := 0; back < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); back++ {
		n--
	}
	return s[:n]
}

// tooLarge reports whether a send failed for the record's size: refused by
// sarama (Producer.MaxMessageBytes) or by the broker (max.message.bytes).
func tooLarge(err error) bool {
	var ce sarama.ConfigurationError
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrMessageSetSizeTooLarge) ||
		(errors.As(err, &ce) && strings.Contains(string(ce), "MaxMessageBytes"))
}

// deadLetterProducer sends dead letters that fail for their size again, cut
// down, in case the limit worked out at start-up was wrong (the topic's
// max.message.bytes was lowered since). A cut-down copy that fails for its
// size too is dropped, logged and counted, never retried: the input's
// partition must move on. Every other send, and every other error, is the
// wrapped producer's.
type deadLetterProducer struct {
	goka.Producer
	topic string
	log   *slog.Logger
	count func(result string)
}

func (p deadLetterProducer) EmitWithHeaders(topic, key string, value []byte, headers goka.Headers) *goka.Promise {
	first := p.Producer.EmitWithHeaders(topic, key, value, headers)
	if topic != p.topic {
		return first
	}
	outer, finish := goka.NewPromiseWithFinisher()
	first.ThenWithMessage(func(msg *sarama.ProducerMessage, err error) {
		if err == nil || !tooLarge(err) {
			finish(msg, err)
			return
		}
		// Not from the producer's result goroutine: sending from it can
		// wait on the producer, which waits for the results to be read.
		go p.again(topic, key, value, headers, err, finish)
	})
	return outer
}

func (p deadLetterProducer) again(topic, key string, value []byte, headers goka.Headers, cause error, finish goka.PromiseFinisher) {
	var hs []*kitpb.Header
	for k, v := range headers {
		hs = append(hs, &kitpb.Header{Key: k, Value: v})
	}
	o := cutDown(topic, key, value, hs)
	p.count("cut-down")
	p.log.Warn("dead letter refused for its size; sending it cut down", "key_bytes", len(key), "value_bytes", len(value), "err", cause)
	ch := goka.Headers{}
	for _, h := range o.GetHeaders() {
		ch[h.GetKey()] = h.GetValue()
	}
	p.Producer.EmitWithHeaders(topic, o.GetKey(), o.GetValue(), ch).ThenWithMessage(func(msg *sarama.ProducerMessage, err error) {
		if err != nil && tooLarge(err) {
			p.count("dropped")
			p.log.Error("cut-down dead letter refused for its size too; dropped so its partition moves on", "key_bytes", len(key), "value_bytes", len(value), "err", err)
			err = nil
		}
		finish(msg, err)
	})
}

// deadLetterProducerBuilder wraps the producers b builds in
// deadLetterProducer.
func deadLetterProducerBuilder(b goka.ProducerBuilder, topic string, log *slog.Logger, m *metrics, group string) goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		pr, err := b(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		return deadLetterProducer{Producer: pr, topic: topic, log: log,
			count: func(result string) { m.deadLettersCut.WithLabelValues(group, result).Inc() }}, nil
	}
}

// topicMaxMessageBytes reads topic's max.message.bytes from the broker
// (Kafka's default when the broker does not say).
func topicMaxMessageBytes(ctx context.Context, cl cluster.Config, topic string) (int, error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return 0, err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, err
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(kc).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, err
	}
	if rc.Err != nil {
		return 0, rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			n, err := strconv.Atoi(*c.Value)
			if err != nil {
				return 0, fmt.Errorf("max.message.bytes of %s: %w", topic, err)
			}
			return n, nil
		}
	}
	return kafkaMaxMessageBytes, nil
}

// deadLetterRoom is the producer config pc with its MaxMessageBytes raised to
// what the dead-letter topic accepts, when that is more (Kafka's default
// max.message.bytes is already a little more than sarama's default
// MaxMessageBytes, less a batch header), and the largest dead letter the
// group then sends whole. A topic limit that cannot be read is taken for
// Kafka's default: a dead letter refused anyway is sent again cut down.
func (g *Group[S, PS]) deadLetterRoom(ctx context.Context, cl cluster.Config, pc *sarama.Config) (*sarama.Config, int) {
	topicMax, err := topicMaxMessageBytes(ctx, cl, g.deadLetter)
	if err != nil {
		g.log.Warn("reading the dead-letter topic's max.message.bytes failed; assuming Kafka's default", "topic", g.deadLetter, "default", kafkaMaxMessageBytes, "err", err)
		topicMax = kafkaMaxMessageBytes
	}
	if room := topicMax - batchOverhead; room > pc.Producer.MaxMessageBytes && room < int(sarama.MaxRequestSize) {
		c := *pc
		c.Producer.MaxMessageBytes = room
		pc = &c
	}
	return pc, deadLetterLimit(pc.Producer.MaxMessageBytes, topicMax)
}
