package fences

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// recordLog keeps every record logged through it.
type recordLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }

// errors are the ERROR records as "key fix" lines.
func (h *recordLog) errors() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level < slog.LevelError {
			continue
		}
		var key, fix string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "key":
				key = a.Value.String()
			case "fix":
				fix = a.Value.String()
			}
			return true
		})
		out = append(out, key+" | "+fix)
	}
	return out
}

func TestFollowerReportsEachInvalidRecordOnceWithTheFix(t *testing.T) {
	cl := embeddedtest.Cluster(t)
	kc := embeddedtest.Client(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "fences"
	if _, err := kadm.NewClient(kc).CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic); err != nil {
		t.Fatal(err)
	}
	demo, err := ParseFeatureCollection(DemoGeoJSON())
	if err != nil {
		t.Fatal(err)
	}
	codec := codecs.For[geofencepb.Fence]()
	enc := func(f *geofencepb.Fence) []byte {
		v, err := codec.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	renamed := enc(demo[1])
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		for _, r := range recs {
			r.Topic = topic
		}
		if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(
		&kgo.Record{Key: []byte(demo[0].GetFenceId()), Value: enc(demo[0])},
		&kgo.Record{Key: []byte("garbage"), Value: []byte{0xff, 0xff, 0xff}},
		// Fixed later in the topic: history, not news.
		&kgo.Record{Key: []byte(demo[2].GetFenceId()), Value: []byte("not a fence")},
		&kgo.Record{Key: []byte(demo[2].GetFenceId()), Value: enc(demo[2])},
		// Valid fence under another key: only a tombstone for this key removes it.
		&kgo.Record{Key: []byte("wrong key"), Value: renamed},
		&kgo.Record{Key: []byte{0xc3, 0x28}, Value: []byte("x")},
	)

	logs := &recordLog{}
	cat := New()
	f := NewFollower(cl, topic, cat, slog.New(logs), nil)
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	defer func() { stop(); <-done }()
	go func() { done <- f.Run(fctx) }()
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("follower ended before ready: %v", err)
	case <-ctx.Done():
		t.Fatal("follower not ready within a minute")
	}
	want := []string{
		"garbage | remove it with: fencectl fences delete garbage",
		"wrong key | remove it with: fencectl fences delete 'wrong key'",
		"\xc3( | remove it with: fencectl fences delete --hex c328",
	}
	got := logs.errors()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors logged while catching up:\n%s\nwant each still-invalid record once, by key, with its fix:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := cat.Snapshot().Len(); n != 2 {
		t.Errorf("catalogue holds %d fences, want 2", n)
	}

	// After catching up, a new invalid record is reported at once, once.
	produce(&kgo.Record{Key: []byte("late"), Value: []byte{1}})
	deadline := time.Now().Add(30 * time.Second)
	for len(logs.errors()) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the invalid record produced after catching up was not reported")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := logs.errors(); len(got) != 4 || got[3] != "late | remove it with: fencectl fences delete late" {
		t.Fatalf("errors: %q", got)
	}
}

// updates counts the "fence catalogue updated" records.
func (h *recordLog) updates() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Message == "fence catalogue updated" {
			n++
		}
	}
	return n
}

// TestFollowerIndexesAStartOnce: a start reads the whole topic (several
// fetches) and indexes it in one batch; later records apply one by one.
func TestFollowerIndexesAStartOnce(t *testing.T) {
	cl := embeddedtest.Cluster(t)
	kc := embeddedtest.Client(t, cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, n = "fences", 4000
	if _, err := kadm.NewClient(kc).CreateTopic(ctx, 2, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic); err != nil {
		t.Fatal(err)
	}
	fs, err := Synthetic(n+1, 8)
	if err != nil {
		t.Fatal(err)
	}
	codec := codecs.For[geofencepb.Fence]()
	record := func(f Fence) *kgo.Record {
		pb, err := f.ToProto()
		if err != nil {
			t.Fatal(err)
		}
		v, err := codec.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: topic, Key: []byte(f.ID), Value: v}
	}
	recs := make([]*kgo.Record, 0, n+1)
	bytes := 0
	for _, f := range fs[:n] {
		recs = append(recs, record(f))
		bytes += len(recs[len(recs)-1].Value)
	}
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fs[0].ID)}) // a tombstone
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	logs := &recordLog{}
	cat := New()
	f := NewFollower(cl, topic, cat, slog.New(logs), nil)
	done := make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	defer func() { stop(); <-done }()
	go func() { done <- f.Run(fctx) }()
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("follower ended before ready: %v", err)
	case <-ctx.Done():
		t.Fatal("follower not ready in time")
	}
	if got := cat.Snapshot().Len(); got != n-1 {
		t.Fatalf("ready with %d fences, want %d", got, n-1)
	}
	if _, ok := cat.Snapshot().Get(fs[0].ID); ok {
		t.Error("the tombstoned fence is held")
	}
	if u := logs.updates(); u != 1 {
		t.Errorf("the start (%d KiB of fences) was applied in %d batches, want 1", bytes>>10, u)
	}

	if err := kc.ProduceSync(ctx, record(fs[n])).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for cat.Snapshot().Len() != n {
		if time.Now().After(deadline) {
			t.Fatal("the fence produced after the start was not applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v, want := cat.Version(), uint64(n+2); v != want {
		t.Errorf("version %d, want %d (the sum of the partitions' next offsets)", v, want)
	}
}
