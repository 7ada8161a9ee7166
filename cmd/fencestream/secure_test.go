package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

	"github.com/fencestream/fencestream/topology/cluster"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "broker.pem"), filepath.Join(dir, "broker-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// The all-in-one's embedded broker takes TLS and SASL settings, its own
// processors use them, and a client without them is told what is missing.
func TestEmbeddedBrokerOverTLSAndSASL(t *testing.T) {
	certFile, keyFile := selfSigned(t, t.TempDir())
	data := t.TempDir()
	p := start(t, "--data", data, "--broker-port", "0", "--listen", "127.0.0.1:0", "--no-sim", "--partitions", "2",
		"--broker-tls-cert", certFile, "--broker-tls-key", keyFile, "--broker-sasl-user", "SCRAM-SHA-512:ops:pa:ss")
	url := p.waitOutput(t, reURL, startDeadline)[1]
	kafka := p.waitOutput(t, reKafka, startDeadline)[1]
	waitServing(t, p, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := cluster.Config{Brokers: []string{kafka}, TLS: true, TLSCAFile: certFile, SASLMechanism: "SCRAM-SHA-512", SASLUser: "ops", SASLPassword: "pa:ss"}
	if err := cluster.Diagnose(ctx, good); err != nil {
		t.Fatalf("the broker's own settings: %v", err)
	}
	noSASL := good
	noSASL.SASLMechanism = ""
	if err := cluster.Diagnose(ctx, noSASL); !errors.Is(err, cluster.ErrAuthentication) {
		t.Errorf("without SASL: %v, want an authentication failure", err)
	}
	if err := cluster.Diagnose(ctx, cluster.Config{Brokers: []string{kafka}}); !errors.Is(err, cluster.ErrTLS) {
		t.Errorf("plaintext: %v, want a TLS failure", err)
	}
	if code := p.interrupt(t); code != 0 {
		t.Fatalf("SIGINT: exit code %d, want 0", code)
	}

	// Restarted without its user, the broker would accept anyone: refused
	// (on main it started open).
	again := start(t, "--data", data, "--broker-port", "0", "--listen", "127.0.0.1:0", "--no-sim", "--partitions", "2",
		"--broker-tls-cert", certFile, "--broker-tls-key", keyFile)
	if code := again.wait(t); code == 0 {
		t.Fatal("a restart without --broker-sasl-user exited 0")
	}
	for _, want := range []string{"required SASL", "--broker-sasl-user", "--broker-drop-sasl"} {
		if !strings.Contains(again.out.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, tail(again.out.String(), 20))
		}
	}
}
