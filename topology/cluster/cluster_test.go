package cluster_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/fencestream/fencestream/topology/cluster"
)

func TestValidate(t *testing.T) {
	ok := cluster.Config{Brokers: []string{"127.0.0.1:9092"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("plaintext config: %v", err)
	}
	cases := []struct {
		name string
		cfg  cluster.Config
		want string
	}{
		{"no brokers", cluster.Config{}, "no brokers given"},
		{"unknown mechanism", cluster.Config{Brokers: ok.Brokers, SASLMechanism: "GSSAPI", SASLUser: "u"}, `unknown SASL mechanism "GSSAPI"`},
		{"plain without user", cluster.Config{Brokers: ok.Brokers, SASLMechanism: cluster.MechanismPlain, SASLPassword: "p"}, "SASL PLAIN needs a user"},
		{"scram without user", cluster.Config{Brokers: ok.Brokers, SASLMechanism: cluster.MechanismSCRAMSHA512}, "SASL SCRAM-SHA-512 needs a user"},
		{"cert without key", cluster.Config{Brokers: ok.Brokers, TLS: true, TLSCertFile: "c.pem"}, "both a certificate and a key"},
		{"key without cert", cluster.Config{Brokers: ok.Brokers, TLS: true, TLSKeyFile: "k.pem"}, "both a certificate and a key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, c.want)
			}
			// Both client builders refuse the same config before connecting.
			if _, err := c.cfg.Sarama(); err == nil {
				t.Error("Sarama() accepted an invalid config")
			}
			if _, err := c.cfg.Kgo(); err == nil {
				t.Error("Kgo() accepted an invalid config")
			}
		})
	}
	// Mechanisms are case-insensitive.
	lower := cluster.Config{Brokers: ok.Brokers, SASLMechanism: "scram-sha-256", SASLUser: "u"}
	if err := lower.Validate(); err != nil {
		t.Fatalf("lower-case mechanism: %v", err)
	}
}

func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"BROKERS", "TLS", "TLS_CA", "TLS_CERT", "TLS_KEY", "SASL_MECHANISM", "SASL_USER", "SASL_PASSWORD"} {
		t.Setenv("FENCESTREAM_"+k, "")
	}
}

func TestRegisterFlagsParses(t *testing.T) {
	clearEnv(t)
	var c cluster.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{"--brokers", "a:1, b:2,,", "--tls", "--tls-ca", "/ca.pem", "--tls-cert", "/c.pem", "--tls-key", "/k.pem",
		"--tls-insecure", "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "u", "--sasl-password", "p"})
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.Config{Brokers: []string{"a:1", "b:2"}, TLS: true, TLSCAFile: "/ca.pem", TLSCertFile: "/c.pem", TLSKeyFile: "/k.pem",
		TLSInsecureSkipVerify: true, SASLMechanism: "SCRAM-SHA-256", SASLUser: "u", SASLPassword: "p"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
}

func TestRegisterFlagsEnvDefaults(t *testing.T) {
	clearEnv(t)
	t.Setenv("FENCESTREAM_BROKERS", " k1:9092 ,k2:9092")
	t.Setenv("FENCESTREAM_TLS", "true")
	t.Setenv("FENCESTREAM_TLS_CA", "/env/ca.pem")
	t.Setenv("FENCESTREAM_TLS_CERT", "/env/c.pem")
	t.Setenv("FENCESTREAM_TLS_KEY", "/env/k.pem")
	t.Setenv("FENCESTREAM_SASL_MECHANISM", "PLAIN")
	t.Setenv("FENCESTREAM_SASL_USER", "envuser")
	t.Setenv("FENCESTREAM_SASL_PASSWORD", "s3cret")

	var c cluster.Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want := cluster.Config{Brokers: []string{"k1:9092", "k2:9092"}, TLS: true, TLSCAFile: "/env/ca.pem", TLSCertFile: "/env/c.pem", TLSKeyFile: "/env/k.pem",
		SASLMechanism: "PLAIN", SASLUser: "envuser", SASLPassword: "s3cret"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("env defaults\n%+v\nwant\n%+v", c, want)
	}

	// Flags override the environment.
	var c2 cluster.Config
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	c2.RegisterFlags(fs2)
	if err := fs2.Parse([]string{"--brokers", "x:1", "--sasl-password", "flagpw", "--tls=false"}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2.Brokers, []string{"x:1"}) || c2.SASLPassword != "flagpw" || c2.TLS || c2.SASLUser != "envuser" {
		t.Fatalf("flags over env: %+v", c2)
	}

	// The usage names the environment variables, and never prints the secret.
	var usage strings.Builder
	fs2.SetOutput(&usage)
	fs2.PrintDefaults()
	if !strings.Contains(usage.String(), "FENCESTREAM_BROKERS") || !strings.Contains(usage.String(), "FENCESTREAM_SASL_PASSWORD") {
		t.Errorf("usage does not name the environment variables:\n%s", usage.String())
	}
}

func TestSaramaOldestOffsetAndDefaults(t *testing.T) {
	c := cluster.Config{Brokers: []string{"127.0.0.1:9092"}, ClientID: "fencestream-test"}
	sc, err := c.Sarama()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Consumer.Offsets.Initial != sarama.OffsetOldest {
		t.Errorf("Consumer.Offsets.Initial = %d, want OffsetOldest (%d): a new group must not skip records", sc.Consumer.Offsets.Initial, sarama.OffsetOldest)
	}
	if sc.Producer.RequiredAcks != sarama.WaitForAll {
		t.Errorf("RequiredAcks = %v, want WaitForAll", sc.Producer.RequiredAcks)
	}
	if sc.ClientID != "fencestream-test" {
		t.Errorf("ClientID = %q", sc.ClientID)
	}
	// A JoinGroup blocks up to the rebalance timeout; a shorter read timeout
	// ends a processor on a slow rebalance.
	if sc.Net.ReadTimeout <= sc.Consumer.Group.Rebalance.Timeout {
		t.Errorf("Net.ReadTimeout %s is not above Rebalance.Timeout %s", sc.Net.ReadTimeout, sc.Consumer.Group.Rebalance.Timeout)
	}
	if sc.Net.SASL.Enable || sc.Net.TLS.Enable {
		t.Errorf("plaintext config enabled SASL=%v TLS=%v", sc.Net.SASL.Enable, sc.Net.TLS.Enable)
	}
	// Every call builds a fresh config: callers may change one without touching another.
	sc2, err := c.Sarama()
	if err != nil {
		t.Fatal(err)
	}
	if sc == sc2 {
		t.Error("Sarama() returned a shared config")
	}
}

func TestSaramaSASLFields(t *testing.T) {
	cases := []struct {
		mech   string
		want   sarama.SASLMechanism
		scram  bool
		kgoMec string
	}{
		{cluster.MechanismPlain, sarama.SASLTypePlaintext, false, "PLAIN"},
		{cluster.MechanismSCRAMSHA256, sarama.SASLTypeSCRAMSHA256, true, "SCRAM-SHA-256"},
		{cluster.MechanismSCRAMSHA512, sarama.SASLTypeSCRAMSHA512, true, "SCRAM-SHA-512"},
		{"scram-sha-512", sarama.SASLTypeSCRAMSHA512, true, "SCRAM-SHA-512"},
	}
	for _, c := range cases {
		t.Run(c.mech, func(t *testing.T) {
			cfg := cluster.Config{Brokers: []string{"127.0.0.1:9092"}, SASLMechanism: c.mech, SASLUser: "alice", SASLPassword: "pw"}
			sc, err := cfg.Sarama()
			if err != nil {
				t.Fatal(err)
			}
			if !sc.Net.SASL.Enable || sc.Net.SASL.Mechanism != c.want || sc.Net.SASL.User != "alice" || sc.Net.SASL.Password != "pw" || !sc.Net.SASL.Handshake {
				t.Fatalf("SASL = %+v", sc.Net.SASL)
			}
			if c.scram {
				if sc.Net.SASL.SCRAMClientGeneratorFunc == nil {
					t.Fatal("SCRAM without a client generator")
				}
				// The generated client runs a real first step.
				sc := sc.Net.SASL.SCRAMClientGeneratorFunc()
				if err := sc.Begin("alice", "pw", ""); err != nil {
					t.Fatal(err)
				}
				first, err := sc.Step("")
				if err != nil || !strings.HasPrefix(first, "n,,n=alice,r=") {
					t.Fatalf("SCRAM client-first = %q, %v", first, err)
				}
				if sc.Done() {
					t.Fatal("SCRAM conversation done after the first step")
				}
			}
			if sc.Net.TLS.Enable {
				t.Error("SASL enabled TLS")
			}
			opts, err := cfg.Kgo()
			if err != nil {
				t.Fatal(err)
			}
			if len(opts) != 2 { // seed brokers + SASL
				t.Errorf("Kgo() gave %d options, want seed brokers and SASL", len(opts))
			}
		})
	}
}

func TestSaramaTLSFields(t *testing.T) {
	dir := t.TempDir()
	pki := newPKI(t)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pki.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := pki.writeClientPair(t, dir)

	cfg := cluster.Config{Brokers: []string{"127.0.0.1:9093"}, TLS: true, TLSCAFile: caFile, TLSCertFile: certFile, TLSKeyFile: keyFile}
	sc, err := cfg.Sarama()
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Net.TLS.Enable || sc.Net.TLS.Config == nil {
		t.Fatalf("TLS not enabled: %+v", sc.Net.TLS)
	}
	tc := sc.Net.TLS.Config
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
		t.Fatalf("TLS config: RootCAs=%v certs=%d insecure=%v", tc.RootCAs != nil, len(tc.Certificates), tc.InsecureSkipVerify)
	}
	if tc.MinVersion < 0x0303 { // TLS 1.2
		t.Errorf("MinVersion = %x, want at least TLS 1.2", tc.MinVersion)
	}

	// TLS=false ignores the files entirely.
	off := cluster.Config{Brokers: cfg.Brokers, TLSCAFile: "/does/not/exist"}
	if sc, err := off.Sarama(); err != nil || sc.Net.TLS.Enable {
		t.Fatalf("TLS off: enable=%v err=%v", sc != nil && sc.Net.TLS.Enable, err)
	}

	bad := []struct {
		name string
		cfg  cluster.Config
		want string
	}{
		{"missing CA", cluster.Config{Brokers: cfg.Brokers, TLS: true, TLSCAFile: filepath.Join(dir, "nope.pem")}, "reading TLS CA"},
		{"CA without PEM", cluster.Config{Brokers: cfg.Brokers, TLS: true, TLSCAFile: writeFile(t, dir, "junk.pem", "not a certificate")}, "holds no PEM certificate"},
		{"bad client pair", cluster.Config{Brokers: cfg.Brokers, TLS: true, TLSCertFile: caFile, TLSKeyFile: writeFile(t, dir, "k2.pem", "junk")}, "loading TLS client certificate"},
	}
	for _, b := range bad {
		if _, err := b.cfg.Sarama(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: Sarama() = %v, want %q", b.name, err, b.want)
		}
		if _, err := b.cfg.Kgo(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: Kgo() = %v, want %q", b.name, err, b.want)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
