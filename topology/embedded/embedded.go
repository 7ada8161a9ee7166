package embedded

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencestream/fencestream/topology/dirlock"
)

// Opt configures Start.
type Opt func(*config)

type config struct {
	dataDir  string
	port     int
	brokers  int
	kfake    []kfake.Opt
	users    int // SASL users given
	dropSASL bool
}

// DataDir persists the broker's log under dir (default: none, in-memory).
func DataDir(dir string) Opt { return func(c *config) { c.dataDir = dir } }

// Port listens on 127.0.0.1:port (default 0: any free port). With more than one
// broker, the following brokers take the next ports.
func Port(port int) Opt { return func(c *config) { c.port = port } }

// Brokers sets the number of brokers in the cluster (default 1).
func Brokers(n int) Opt { return func(c *config) { c.brokers = n } }

// SASL requires SASL authentication and adds a superuser with the given mechanism
// (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512). The users given are the only ones:
// none is kept in the data directory, so a restart with other users (or other
// passwords) accepts exactly those. A data directory once served with users
// refuses a start without any unless DropSASL is given.
func SASL(mechanism, user, password string) Opt {
	return func(c *config) {
		c.users++
		c.kfake = append(c.kfake, kfake.EnableSASL(), kfake.Superuser(mechanism, user, password))
	}
}

// TLS serves TLS with the given server config.
func TLS(cfg *tls.Config) Opt { return func(c *config) { c.kfake = append(c.kfake, kfake.TLS(cfg)) } }

// SleepOutOfOrder lets requests behind one a kfake control function holds
// (Cluster().SleepControl) be handled while it sleeps; their responses still
// wait for it, as Kafka orders responses per connection. Fault tests use it
// to let a later produce request land before an earlier one fails.
func SleepOutOfOrder() Opt {
	return func(c *config) { c.kfake = append(c.kfake, kfake.SleepOutOfOrder()) }
}

// clusterID is random per data directory and kept in it, so local state that
// outlives a wiped broker can be recognised as belonging to another cluster.
func clusterID(dataDir string) (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	fresh := "fencestream-" + hex.EncodeToString(b[:])
	if dataDir == "" {
		return fresh, nil
	}
	path := filepath.Join(dataDir, "fencestream-cluster-id")
	if data, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(data))) > 0 {
		return strings.TrimSpace(string(data)), nil
	}
	if err := os.WriteFile(path, []byte(fresh+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("embedded broker: writing cluster id: %w", err)
	}
	return fresh, nil
}

// Broker is a running embedded cluster.
type Broker struct {
	cluster *kfake.Cluster
	dataDir string
	lock    *dirlock.Lock // nil in memory
}

// Start starts the cluster. Close it when done.
func Start(opts ...Opt) (*Broker, error) {
	cfg := config{brokers: 1}
	for _, o := range opts {
		o(&cfg)
	}
	kopts := []kfake.Opt{kfake.NumBrokers(cfg.brokers)}
	if cfg.port != 0 {
		ports := make([]int, cfg.brokers)
		for i := range ports {
			ports[i] = cfg.port + i
		}
		kopts = append(kopts, kfake.Ports(ports...))
	}
	if cfg.dataDir != "" {
		abs, err := filepath.Abs(cfg.dataDir)
		if err != nil {
			return nil, fmt.Errorf("embedded broker data dir: %w", err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("embedded broker data dir: %w", err)
		}
		cfg.dataDir = abs
		kopts = append(kopts, kfake.DataDir(abs))
	}
	// One broker per data directory, locked before anything in it is read:
	// two brokers on one log duplicate offsets and roll back group commits.
	var lock *dirlock.Lock
	if cfg.dataDir != "" {
		l, err := dirlock.Acquire(cfg.dataDir)
		if err != nil {
			return nil, fmt.Errorf("embedded broker data dir: %w", err)
		}
		lock = l
	}
	if cfg.dataDir != "" {
		if err := prepareSASL(cfg.dataDir, cfg.users, cfg.dropSASL); err != nil {
			_ = lock.Release()
			return nil, err
		}
	}
	id, err := clusterID(cfg.dataDir)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	kopts = append(kopts, kfake.ClusterID(id))
	kopts = append(kopts, cfg.kfake...)
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		_ = lock.Release()
		return nil, fmt.Errorf("starting embedded broker: %w", err)
	}
	// kfake saved its users when it created the directory's state.
	if cfg.dataDir != "" {
		if err := removeStoredUsers(cfg.dataDir); err != nil {
			c.Close()
			_ = lock.Release()
			return nil, err
		}
	}
	return &Broker{cluster: c, dataDir: cfg.dataDir, lock: lock}, nil
}

// Addrs are the bootstrap addresses (host:port on 127.0.0.1).
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// DataDir is where the log is persisted ("" when in memory).
func (b *Broker) DataDir() string { return b.dataDir }

// Cluster exposes kfake for tests that move partitions or inject faults.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the cluster and, with a data directory, flushes it.
// The directory stays locked until the log is flushed.
// kfake's copy of the users, saved on close, is deleted before the unlock.
func (b *Broker) Close() {
	b.cluster.Close()
	if b.dataDir != "" {
		_ = removeStoredUsers(b.dataDir)
	}
	_ = b.lock.Release()
}
