package group

import (
	"context"
	"fmt"
	"hash"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/dueindex"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// benchKeys keys with a timer each over benchParts partitions: a fleet of
// devices each waiting for its silence.
const (
	benchKeys  = 1_000_000
	benchParts = 24
)

// countingProducer is a producer that only counts what it is given, and
// keeps the keys of the ticks since the last handled batch.
type countingProducer struct {
	n    int
	keys []string
}

func (p *countingProducer) Emit(topic, key string, value []byte) *goka.Promise {
	return p.EmitWithHeaders(topic, key, value, nil)
}

func (p *countingProducer) EmitWithHeaders(_, key string, _ []byte, _ goka.Headers) *goka.Promise {
	p.n++
	p.keys = append(p.keys, key)
	_, finish := goka.NewPromiseWithFinisher()
	return finish(&sarama.ProducerMessage{}, nil)
}

func (p *countingProducer) Close() error { return nil }

// benchProcessor is a processor's timer driver over 24 partitions holding
// keys keys with a timer each, sending its ticks to prod.
func benchProcessor(b *testing.B, keys int, prod *countingProducer) *Processor {
	b.Helper()
	const parts = benchParts
	log := slog.New(slog.DiscardHandler)
	x := dueindex.New("bench-table", log)
	for p := range int32(parts) {
		pt := dueindex.NewPart()
		for i := p; i < int32(keys); i += parts {
			pt.Set(fmt.Sprintf("device-%07d", i), []*kitpb.Timer{{Name: "silence", AtMs: time.Hour.Milliseconds() + int64(i), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}})
		}
		x.Install(p, pt)
	}
	em, err := goka.NewEmitter(nil, "bench-timers", codecs.For[kitpb.Tick](), goka.WithEmitterProducerBuilder(func([]string, string, func() hash.Hash32) (goka.Producer, error) { return prod, nil }))
	if err != nil {
		b.Fatal(err)
	}
	var wall time.Time
	return &Processor{name: "bench", log: log, timers: &timerDriver{name: "bench", every: time.Second, batch: DefaultTimerBatch, idx: x, log: log, emitter: em,
		now:       func() time.Time { return wall },
		streamNow: func(int32, time.Time) int64 { return 0 }}}
}

// BenchmarkFireTimers is a whole look (FireTimers) of a processor holding
// 1,000,000 keys with a timer each over 24 partitions: idle, nothing due
// (what the processor spends every TimerInterval while its fleet is quiet);
// and burst, all due at once, one look's batches (24 × DefaultTimerBatch
// ticks), each batch handled before the next look. cpu-ns/op is the
// process's CPU time per look, which a loaded machine does not inflate.
func BenchmarkFireTimers(b *testing.B) {
	b.Run("idle", func(b *testing.B) {
		prod := &countingProducer{}
		p := benchProcessor(b, benchKeys, prod)
		c0 := cpuNs(b)
		for b.Loop() {
			if err := p.FireTimers(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
		if prod.n != 0 {
			b.Fatalf("%d ticks sent", prod.n)
		}
	})
	b.Run("burst", func(b *testing.B) {
		prod := &countingProducer{}
		p := benchProcessor(b, benchKeys, prod)
		p.timers.streamNow = func(int32, time.Time) int64 { return 3 * time.Hour.Milliseconds() }
		var cpu int64
		for b.Loop() {
			c0 := cpuNs(b)
			if err := p.FireTimers(context.Background()); err != nil {
				b.Fatal(err)
			}
			cpu += cpuNs(b) - c0
			b.StopTimer()
			// The ticks are handled: their keys fire and leave the index.
			parts := p.timers.idx.Partitions()
			for _, k := range prod.keys {
				var i int32
				if _, err := fmt.Sscanf(k, "device-%d", &i); err != nil {
					b.Fatal(err)
				}
				parts[i%benchParts].Set(k, nil)
			}
			prod.keys = prod.keys[:0]
			if p.TimerStats().Indexed == 0 {
				p = benchProcessor(b, benchKeys, prod)
				p.timers.streamNow = func(int32, time.Time) int64 { return 3 * time.Hour.Milliseconds() }
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(prod.n)/float64(b.N), "ticks/op")
	})
}

// cpuNs is the process's CPU time so far (user + system), in nanoseconds:
// what a benchmark on a loaded machine can still measure.
func cpuNs(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
