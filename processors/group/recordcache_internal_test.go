package group

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// stuckProducer fails every send once it failed one, as a sarama producer
// that lost its cluster may go on doing after the cluster is back.
type stuckProducer struct {
	sarama.SyncProducer
	fail   bool
	closed bool
}

func (p *stuckProducer) SendMessages(msgs []*sarama.ProducerMessage) error {
	if p.fail {
		return errors.New("kafka: Failed to deliver messages")
	}
	for i, m := range msgs {
		m.Offset = int64(i)
	}
	return nil
}

func (p *stuckProducer) Close() error { p.closed = true; return nil }

// TestRecordCacheFlushRecoversFromAFailedProducer: a flush whose changelog
// produce failed leaves its values dirty, and the next flush writes them with
// a new producer; reusing the one that failed left the cache unflushed (and
// the inputs uncommitted) for good after a broker restart.
func TestRecordCacheFlushRecoversFromAFailedProducer(t *testing.T) {
	m, err := newCacheMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c := newRecordCache(cacheConfig{bytes: 1 << 20, every: time.Hour}, "tab", "g", m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var prods []*stuckProducer
	c.newProducer = func() (sarama.SyncProducer, error) {
		p := &stuckProducer{fail: len(prods) == 0}
		prods = append(prods, p)
		return p, nil
	}
	build := c.storageBuilder(func(string, int32) (storage.Storage, error) { return storage.NewMemory(), nil })
	st, err := build("tab", 0)
	if err != nil {
		t.Fatal(err)
	}
	env := &kitpb.Envelope{State: []byte("s"), HasState: true}
	b, err := encodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	c.put(0, "k", env, b, nil)

	c.flush()
	if v, _ := st.Get("k"); v != nil {
		t.Fatalf("stored %q after a failed produce", v)
	}
	c.flush()
	if v, _ := st.Get("k"); v == nil {
		t.Fatalf("nothing stored after the second flush (producers made: %d)", len(prods))
	}
	if len(prods) != 2 || !prods[0].closed {
		t.Errorf("producers made %d, the failed one closed: %v; want 2, true", len(prods), len(prods) > 0 && prods[0].closed)
	}
}
