// Package embeddedtest gives tests an embedded broker and clients of it, and
// removes them when the test ends.
//
// Invariant: everything it starts binds 127.0.0.1, lives under t.TempDir()
// and is closed by t.Cleanup.
package embeddedtest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
)

// Start starts an embedded broker with its data under t.TempDir().
func Start(t testing.TB, opts ...embedded.Opt) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(append([]embedded.Opt{embedded.DataDir(t.TempDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Cluster starts a broker and returns how to reach it.
func Cluster(t testing.TB) cluster.Config {
	t.Helper()
	return cluster.Config{Brokers: Start(t).Addrs()}
}

// Client is a franz-go client of cl (Kafka's default murmur2 partitioner: a
// Java-compatible foreign producer), closed when the test ends.
func Client(t testing.TB, cl cluster.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base, err := cl.Kgo()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// ConsumeUntil reads topic from the start until cond holds for the records read
// so far, failing the test if it does not within a minute.
func ConsumeUntil(t testing.TB, cl cluster.Config, topic string, cond func([]*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	c := Client(t, cl, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for !cond(recs) {
		f := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: condition not met before the deadline; read %d records", topic, len(recs))
		}
		recs = append(recs, f.Records()...)
	}
	return recs
}

// SyncBuffer collects a child process's output for assertions while it runs.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FailProduce is the response that fails every partition of req with code,
// for a kfake control function injecting produce errors.
func FailProduce(req *kmsg.ProduceRequest, code *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code.Code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
