package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/dirlock"
	"github.com/fencestream/fencestream/topology/embedded"
)

func client(t *testing.T, b *embedded.Broker, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	kc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc, kadm.NewClient(kc)
}

func clusterID(t *testing.T, adm *kadm.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return meta.Cluster
}

// consumeAll reads every record of topic from the start, waiting at most 20s
// for n records.
func consumeAll(t *testing.T, b *embedded.Broker, topic string, n int) []*kgo.Record {
	t.Helper()
	kc, _ := client(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("got %d of %d records of %s before the deadline", len(out), n, topic)
		}
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestDataDirSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	b, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close) // Close is idempotent; this covers an early t.Fatal
	if b.DataDir() != dir {
		t.Errorf("DataDir() = %q, want %q", b.DataDir(), dir)
	}
	kc, adm := client(t, b)
	id1 := clusterID(t, adm)
	if id1 == "" || id1 == "kfake" {
		t.Fatalf("cluster id %q: want one chosen per data dir, not kfake's fixed default", id1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "kept"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	const n = 30
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "kept", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kc.Close()
	b.Close()

	b2, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatalf("restart on the same dir: %v", err)
	}
	defer b2.Close()
	_, adm2 := client(t, b2)
	if id2 := clusterID(t, adm2); id2 != id1 {
		t.Fatalf("cluster id changed across a restart on the same dir: %q then %q", id1, id2)
	}
	td, err := adm2.ListTopics(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := td["kept"]; !ok || d.Err != nil || len(d.Partitions) != 3 {
		t.Fatalf("topic after restart: %+v", td)
	}
	cfgs, err := adm2.DescribeTopicConfigs(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On("kept", nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := ""
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy = c.MaybeValue()
		}
	}
	if policy != "compact" {
		t.Errorf("cleanup.policy after restart = %q, want compact", policy)
	}
	got := consumeAll(t, b2, "kept", n)
	seen := map[string]string{}
	for _, r := range got {
		seen[string(r.Key)] = string(r.Value)
	}
	for i := range n {
		if v := seen[fmt.Sprintf("k%d", i)]; v != strconv.Itoa(i) {
			t.Errorf("record k%d after restart = %q", i, v)
		}
	}

	// Another data dir is another cluster.
	other, err := embedded.Start(embedded.DataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, adm3 := client(t, other)
	if id3 := clusterID(t, adm3); id3 == id1 || id3 == "" {
		t.Fatalf("a different data dir has cluster id %q, the first had %q", id3, id1)
	}
}

func TestInMemoryBrokersHaveDistinctIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	a, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.DataDir() != "" {
		t.Errorf("in-memory broker has data dir %q", a.DataDir())
	}
	_, admA := client(t, a)
	_, admB := client(t, b)
	if ida, idb := clusterID(t, admA), clusterID(t, admB); ida == idb {
		t.Fatalf("two in-memory brokers share cluster id %q", ida)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestPortListensOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	var (
		b    *embedded.Broker
		port int
		err  error
	)
	// Another process may take the port between our probe and Start: retry.
	for attempt := 0; attempt < 5; attempt++ {
		port = freePort(t)
		b, err = embedded.Start(embedded.Port(port))
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if addrs := b.Addrs(); len(addrs) != 1 || addrs[0] != want {
		t.Fatalf("Addrs() = %v, want [%s]", addrs, want)
	}
	// A Kafka client reaches it on exactly that address.
	kc, err := kgo.NewClient(kgo.SeedBrokers(want))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(kc).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != "127.0.0.1" || meta.Brokers[0].Port != int32(port) {
		t.Fatalf("advertised brokers %+v, want 127.0.0.1:%d", meta.Brokers, port)
	}
	// The port is taken while the broker runs.
	if l, err := net.Listen("tcp", want); err == nil {
		l.Close()
		t.Fatalf("port %d is free while the broker runs", port)
	}
}

func TestDataDirIsCreated(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := filepath.Join(t.TempDir(), "nested", "broker")
	b, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("data dir not created: %v", err)
	}
	b2, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatalf("restart on a created dir: %v", err)
	}
	b2.Close()
}

// TestSecondBrokerOnOneDataDirIsRefused: a second broker on a live data
// directory is refused before it reads or writes anything in it (on main it
// started, and its log then held duplicate offsets).
func TestSecondBrokerOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	b, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	before := listing(t, dir)
	second, err := embedded.Start(embedded.DataDir(dir))
	if err == nil {
		second.Close()
		b.Close()
		t.Fatal("a second broker started on a live data directory")
	}
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("error %q: want ErrLocked naming %s and pid %d", err, dir, os.Getpid())
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("the refused broker changed the directory:\nbefore %s\nafter  %s", before, after)
	}
	b.Close()
	again, err := embedded.Start(embedded.DataDir(dir))
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}

// listing is every file under dir with its size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s %d %d;", path, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
