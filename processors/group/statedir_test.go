package group_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/dirlock"
	"github.com/fencestream/fencestream/topology/embedded"
)

func startBroker(t *testing.T, dataDir string) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(embedded.DataDir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func brokerClusterID(t *testing.T, b *embedded.Broker) string {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
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
	return meta.Cluster
}

func build(t *testing.T, b *embedded.Broker, stateDir string) (*group.Processor, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return validGroup(testTopology(2), ignorePing).Processor(ctx, cluster.Config{Brokers: b.Addrs()}, group.StateDir(stateDir))
}

// TestStateDirTiedToCluster: state built from one broker is refused by another
// (a wiped or different cluster), with the fix in the message; the same
// broker, also after a restart on its data dir, accepts it.
func TestStateDirTiedToCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	brokerDir := t.TempDir()
	stateDir := t.TempDir()
	groupDir := filepath.Join(stateDir, testGroup)

	b1 := startBroker(t, brokerDir)
	id1 := brokerClusterID(t, b1)
	proc, err := build(t, b1, stateDir)
	if err != nil {
		t.Fatalf("first build: %v", err)
	}

	// Run it once: Goka's LevelDB state lands in the state dir, next to the
	// marker, never under the OS temp dir.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
	err = proc.WaitForReadyContext(rctx)
	rcancel()
	if err != nil {
		cancel()
		<-done
		t.Fatalf("processor not ready: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("clean stop: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("processor did not stop")
	}
	entries, err := os.ReadDir(groupDir)
	if err != nil {
		t.Fatal(err)
	}
	var tables int
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), topicTab) {
			tables++
		}
	}
	if tables == 0 {
		t.Fatalf("no %s storage under %s: %v", topicTab, groupDir, entries)
	}

	// The same broker again, then the same broker restarted on its data dir.
	if _, err := build(t, b1, stateDir); err != nil {
		t.Fatalf("same broker, same state dir: %v", err)
	}
	b1.Close()
	b1again := startBroker(t, brokerDir)
	if _, err := build(t, b1again, stateDir); err != nil {
		t.Fatalf("same broker restarted on its data dir: %v", err)
	}
	b1again.Close()

	// A fresh broker is another cluster: refuse, and say what to do.
	b2 := startBroker(t, t.TempDir())
	id2 := brokerClusterID(t, b2)
	if id1 == id2 {
		t.Fatalf("two data dirs share cluster id %q", id1)
	}
	_, err = build(t, b2, stateDir)
	if !errors.Is(err, statestore.ErrStateMismatch) {
		t.Fatalf("state of cluster %s on cluster %s: got %v, want ErrStateMismatch", id1, id2, err)
	}
	for _, w := range []string{"delete " + groupDir, id1, id2, testGroup} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	// Refusing changed nothing: the old state is still there for the operator.
	after, err := os.ReadDir(groupDir)
	if err != nil || len(after) != len(entries) {
		t.Errorf("state dir changed by a refused build: %v, %d entries, had %d", err, len(after), len(entries))
	}
}

func TestStateDirUnknownOrCorruptContents(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := startBroker(t, t.TempDir())

	// A directory with something in it but no marker: whose state is it?
	stateDir := t.TempDir()
	groupDir := filepath.Join(stateDir, testGroup)
	if err := os.MkdirAll(filepath.Join(groupDir, topicTab+".0"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := build(t, b, stateDir)
	if !errors.Is(err, statestore.ErrStateMismatch) || !strings.Contains(err.Error(), "delete") || !strings.Contains(err.Error(), groupDir) {
		t.Fatalf("unknown contents: got %v, want ErrStateMismatch telling to delete %s", err, groupDir)
	}

	// A fresh directory is claimed: the marker is its only entry (besides
	// the lock file and the record of the topics' ids, topicwatch.go).
	fresh := t.TempDir()
	if _, err := build(t, b, fresh); err != nil {
		t.Fatalf("fresh state dir: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(fresh, testGroup))
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool {
		return e.Name() == dirlock.FileName || e.Name() == "fencestream-topics.json"
	})
	if err != nil || len(entries) != 1 || entries[0].IsDir() {
		t.Fatalf("fresh state dir after the claim: %v %v, want exactly one marker file", entries, err)
	}
	// A marker that cannot be read is a mismatch too, never silently replaced.
	marker := filepath.Join(fresh, testGroup, entries[0].Name())
	if err := os.WriteFile(marker, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = build(t, b, fresh)
	if !errors.Is(err, statestore.ErrStateMismatch) || !strings.Contains(err.Error(), "delete") {
		t.Fatalf("corrupt marker: got %v, want ErrStateMismatch", err)
	}
	if data, _ := os.ReadFile(marker); string(data) != "{not json" {
		t.Errorf("corrupt marker rewritten to %q", data)
	}
}
