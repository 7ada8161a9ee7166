package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
)

func startBroker(t *testing.T, opts ...embedded.Opt) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// kgoConnect builds a franz-go client from c and asks the broker for its
// metadata, bounded by a deadline.
func kgoConnect(t *testing.T, c cluster.Config) error {
	t.Helper()
	opts, err := c.Kgo()
	if err != nil {
		return err
	}
	opts = append(opts, kgo.RetryTimeout(5*time.Second))
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(kc).BrokerMetadata(ctx)
	return err
}

// kgoCreateTopic creates topic through a client built from c.
func kgoCreateTopic(t *testing.T, c cluster.Config, topic string) {
	t.Helper()
	opts, err := c.Kgo()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(kc).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
}

// saramaConnect builds a sarama client from c, refreshes metadata and, when
// topic is set, sends one record with a SyncProducer.
func saramaConnect(t *testing.T, c cluster.Config, topic string) error {
	t.Helper()
	sc, err := c.Sarama()
	if err != nil {
		return err
	}
	sc.Net.DialTimeout = 5 * time.Second
	sc.Metadata.Retry.Max = 1
	sc.Producer.Return.Successes = true
	cl, err := sarama.NewClient(c.Brokers, sc)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.RefreshMetadata(); err != nil {
		return err
	}
	if topic == "" {
		return nil
	}
	p, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v")})
	return err
}

func TestSASLAgainstEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	for _, mech := range []string{cluster.MechanismPlain, cluster.MechanismSCRAMSHA256, cluster.MechanismSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			b := startBroker(t, embedded.SASL(mech, "alice", "right-password"))
			good := cluster.Config{Brokers: b.Addrs(), SASLMechanism: mech, SASLUser: "alice", SASLPassword: "right-password"}
			if err := kgoConnect(t, good); err != nil {
				t.Fatalf("kgo with the right password: %v", err)
			}
			kgoCreateTopic(t, good, "sasl-"+mech)
			if err := saramaConnect(t, good, "sasl-"+mech); err != nil {
				t.Fatalf("sarama with the right password: %v", err)
			}

			wrong := good
			wrong.SASLPassword = "wrong-password"
			if err := kgoConnect(t, wrong); err == nil {
				t.Error("kgo with a wrong password connected")
			}
			if err := saramaConnect(t, wrong, ""); err == nil {
				t.Error("sarama with a wrong password connected")
			}
			none := cluster.Config{Brokers: b.Addrs()}
			if err := saramaConnect(t, none, ""); err == nil {
				t.Error("sarama without SASL connected to a SASL broker")
			}
		})
	}
}

// pki is a throwaway CA with a server certificate for 127.0.0.1.
type pki struct {
	caPEM      []byte
	ca         *x509.Certificate
	caKey      *ecdsa.PrivateKey
	serverCert tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fencestream test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), ca: ca, caKey: caKey}
	certPEM, keyPEM := p.issue(t, 2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	p.serverCert, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) issue(t *testing.T, serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func (p *pki) writeClientPair(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := p.issue(t, 3, "fencestream-client", x509.ExtKeyUsageClientAuth)
	certFile, keyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSAgainstEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	p := newPKI(t)
	b := startBroker(t, embedded.TLS(&tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}))
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	good := cluster.Config{Brokers: b.Addrs(), TLS: true, TLSCAFile: caFile}
	if err := kgoConnect(t, good); err != nil {
		t.Fatalf("kgo with the CA: %v", err)
	}
	kgoCreateTopic(t, good, "tls")
	if err := saramaConnect(t, good, "tls"); err != nil {
		t.Fatalf("sarama with the CA: %v", err)
	}

	// Without the CA the system pool cannot verify the broker.
	noCA := cluster.Config{Brokers: b.Addrs(), TLS: true}
	var unknown x509.UnknownAuthorityError
	if err := kgoConnect(t, noCA); !errors.As(err, &unknown) {
		t.Errorf("kgo without the CA: %v, want an unknown-authority error", err)
	}
	if err := saramaConnect(t, noCA, ""); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("sarama without the CA: %v, want an unknown-authority error", err)
	}
	// Plaintext against a TLS listener fails too.
	if err := saramaConnect(t, cluster.Config{Brokers: b.Addrs()}, ""); err == nil {
		t.Error("sarama without TLS connected to a TLS broker")
	}
}

func TestMutualTLSAgainstEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	p := newPKI(t)
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	b := startBroker(t, embedded.TLS(&tls.Config{
		Certificates: []tls.Certificate{p.serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := p.writeClientPair(t, dir)

	withCert := cluster.Config{Brokers: b.Addrs(), TLS: true, TLSCAFile: caFile, TLSCertFile: certFile, TLSKeyFile: keyFile}
	if err := kgoConnect(t, withCert); err != nil {
		t.Fatalf("kgo with a client certificate: %v", err)
	}
	if err := saramaConnect(t, withCert, ""); err != nil {
		t.Fatalf("sarama with a client certificate: %v", err)
	}
	noCert := cluster.Config{Brokers: b.Addrs(), TLS: true, TLSCAFile: caFile}
	if err := kgoConnect(t, noCert); err == nil {
		t.Error("kgo without a client certificate connected to a mutual-TLS broker")
	}
	if err := saramaConnect(t, noCert, ""); err == nil {
		t.Error("sarama without a client certificate connected to a mutual-TLS broker")
	}
}
