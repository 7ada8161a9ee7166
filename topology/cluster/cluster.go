package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

// SASL mechanisms understood by Config.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Config is how to reach the cluster. The zero value with Brokers set is a
// plaintext, unauthenticated connection.
type Config struct {
	Brokers []string
	// ClientID names this process to the brokers (logs, quotas).
	ClientID string

	TLS bool
	// TLSCAFile is a PEM bundle to verify brokers with; empty means the system pool.
	TLSCAFile string
	// TLSCertFile/TLSKeyFile enable mutual TLS.
	TLSCertFile, TLSKeyFile string
	TLSInsecureSkipVerify   bool

	// SASLMechanism is empty (no SASL), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
}

// RegisterFlags adds --brokers, --tls*, --sasl-* flags to fs, with defaults taken
// from the environment (FENCESTREAM_BROKERS, FENCESTREAM_SASL_PASSWORD, ...), so
// secrets need not appear on a command line.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("brokers", "comma-separated Kafka bootstrap brokers (env FENCESTREAM_BROKERS)", func(s string) error {
		c.Brokers = splitBrokers(s)
		return nil
	})
	if env := splitBrokers(os.Getenv("FENCESTREAM_BROKERS")); len(env) > 0 {
		c.Brokers = env
	}
	tlsEnv, _ := strconv.ParseBool(os.Getenv("FENCESTREAM_TLS"))
	fs.BoolVar(&c.TLS, "tls", tlsEnv, "connect to brokers with TLS (env FENCESTREAM_TLS=true)")
	fs.StringVar(&c.TLSCAFile, "tls-ca", os.Getenv("FENCESTREAM_TLS_CA"), "PEM CA bundle to verify brokers (env FENCESTREAM_TLS_CA)")
	fs.StringVar(&c.TLSCertFile, "tls-cert", os.Getenv("FENCESTREAM_TLS_CERT"), "client certificate for mutual TLS (env FENCESTREAM_TLS_CERT)")
	fs.StringVar(&c.TLSKeyFile, "tls-key", os.Getenv("FENCESTREAM_TLS_KEY"), "client key for mutual TLS (env FENCESTREAM_TLS_KEY)")
	fs.BoolVar(&c.TLSInsecureSkipVerify, "tls-insecure", false, "do not verify broker certificates (testing only)")
	fs.StringVar(&c.SASLMechanism, "sasl-mechanism", os.Getenv("FENCESTREAM_SASL_MECHANISM"), "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (env FENCESTREAM_SASL_MECHANISM)")
	fs.StringVar(&c.SASLUser, "sasl-user", os.Getenv("FENCESTREAM_SASL_USER"), "SASL user (env FENCESTREAM_SASL_USER)")
	fs.StringVar(&c.SASLPassword, "sasl-password", os.Getenv("FENCESTREAM_SASL_PASSWORD"), "SASL password (env FENCESTREAM_SASL_PASSWORD)")
}

func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Validate reports settings that cannot work, before any connection is tried.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("no brokers given")
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "":
	case MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		if c.SASLUser == "" {
			return fmt.Errorf("SASL %s needs a user", c.SASLMechanism)
		}
	default:
		return fmt.Errorf("unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", c.SASLMechanism)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("mutual TLS needs both a certificate and a key")
	}
	return nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.TLSInsecureSkipVerify} //nolint:gosec // opt-in flag for tests
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("reading TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", c.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if c.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Sarama returns a sarama config for Goka's builders: oldest offset for new groups,
// acks from all in-sync replicas, and the connection settings.
func (c Config) Sarama() (*sarama.Config, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := goka.DefaultConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	// A member learns of a rebalance at its next heartbeat; sarama's 3 s default
	// makes every partition takeover wait for it.
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	// A member that dies without leaving (kill -9) holds its partitions until
	// the session timeout; 6 s is the lowest a default Kafka broker accepts
	// (group.min.session.timeout.ms) and still six heartbeats of slack.
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	// Members get 60 s to finish their work and rejoin (sarama's default, stated).
	cfg.Consumer.Group.Rebalance.Timeout = 60 * time.Second
	// A join that races another rebalance retries; sarama waits 2 s per retry.
	// Shorter retries over the same 8 s window.
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 250 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Max = 32
	// A JoinGroup request waits at the broker until the rebalance completes,
	// up to the rebalance timeout: sarama's 30 s read timeout below that made a
	// slow rebalance end the processor with "i/o timeout" (seen in the chaos
	// test, on members nobody had killed).
	cfg.Net.ReadTimeout = cfg.Consumer.Group.Rebalance.Timeout + 10*time.Second
	if c.ClientID != "" {
		cfg.ClientID = c.ClientID
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tlsCfg
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "":
	case MechanismPlain:
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case MechanismSCRAMSHA256:
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: xscram.SHA256} }
	case MechanismSCRAMSHA512:
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: xscram.SHA512} }
	}
	if cfg.Net.SASL.Enable {
		cfg.Net.SASL.User = c.SASLUser
		cfg.Net.SASL.Password = c.SASLPassword
		cfg.Net.SASL.Handshake = true
	}
	return cfg, cfg.Validate()
}

// Kgo returns franz-go options for admin work, the simulator and foreign-client tests.
// franz-go's default partitioner is Kafka's murmur2, so its placements match ours.
func (c Config) Kgo() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case MechanismPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism()))
	case MechanismSCRAMSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism()))
	case MechanismSCRAMSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism()))
	}
	return opts, nil
}

// scramClient adapts xdg-go/scram to sarama.SCRAMClient.
type scramClient struct {
	gen  xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	cl, err := s.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramClient) Done() bool                            { return s.conv.Done() }
