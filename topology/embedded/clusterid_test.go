package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster id is kept in the data dir by this package too, so that a broker
// that dies before kfake writes its own metadata still comes back as the same
// cluster (and Goka state tied to it stays valid).
func TestClusterIDPersistedPerDataDir(t *testing.T) {
	a, err := clusterID("")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := clusterID("")
	if a == b || !strings.HasPrefix(a, "fencestream-") {
		t.Fatalf("in-memory ids %q and %q: want distinct fencestream- ids", a, b)
	}

	dir := t.TempDir()
	first, err := clusterID(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := clusterID(dir)
	if err != nil || again != first {
		t.Fatalf("same dir gave %q then %q (%v)", first, again, err)
	}
	other, _ := clusterID(t.TempDir())
	if other == first {
		t.Fatalf("two dirs share id %q", first)
	}

	// A hand-written id is honoured (trimmed); an empty file gets a fresh one.
	if err := os.WriteFile(filepath.Join(dir, "fencestream-cluster-id"), []byte("  prod-mirror \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, _ := clusterID(dir); id != "prod-mirror" {
		t.Fatalf("hand-written id read as %q", id)
	}
	if err := os.WriteFile(filepath.Join(dir, "fencestream-cluster-id"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh, err := clusterID(dir)
	if err != nil || fresh == "" || fresh == first {
		t.Fatalf("empty id file: %q, %v", fresh, err)
	}
	if kept, _ := clusterID(dir); kept != fresh {
		t.Fatalf("regenerated id not kept: %q then %q", fresh, kept)
	}

	// A data dir that cannot be written is an error, not a random id.
	if _, err := clusterID(filepath.Join(dir, "missing", "sub")); err == nil {
		t.Fatal("unwritable data dir accepted")
	}
}

// Start uses the id of the data dir even before kfake has written any
// metadata of its own.
func TestStartUsesDataDirID(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fencestream-cluster-id"), []byte("fixed-id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Start(DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Addrs(); len(got) != 1 || !strings.HasPrefix(got[0], "127.0.0.1:") {
		t.Fatalf("listen addrs %v: want one on 127.0.0.1", got)
	}
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
	if meta.Cluster != "fixed-id" {
		t.Fatalf("cluster id %q, want the data dir's fixed-id", meta.Cluster)
	}
}
