package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
)

// Each way security settings can be wrong is reported as itself, not as
// "unreachable: EOF" (issue 17, item 7).
func TestDiagnoseClassifiesSecurityFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	sasl := startBroker(t, embedded.SASL(cluster.MechanismSCRAMSHA256, "alice", "right"))
	plainSASL := startBroker(t, embedded.SASL(cluster.MechanismPlain, "bob", "right"))
	p := newPKI(t)
	tlsB := startBroker(t, embedded.TLS(&tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}))
	plain := startBroker(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	other := newPKI(t) // a CA that did not sign the broker's certificate
	otherCA := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(otherCA, other.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	scram := func(mech, user, pass string) cluster.Config {
		return cluster.Config{Brokers: sasl.Addrs(), SASLMechanism: mech, SASLUser: user, SASLPassword: pass}
	}
	for _, tc := range []struct {
		name string
		cfg  cluster.Config
		want error  // nil: connects
		msg  string // in the message
	}{
		{"scram ok", scram(cluster.MechanismSCRAMSHA256, "alice", "right"), nil, ""},
		{"wrong password", scram(cluster.MechanismSCRAMSHA256, "alice", "wrong"), cluster.ErrAuthentication, `authentication failed: wrong password for user "alice"`},
		{"wrong mechanism", scram(cluster.MechanismSCRAMSHA512, "alice", "right"), cluster.ErrMechanism, "has no SCRAM-SHA-512 credentials for user \"alice\""},
		{"no sasl", cluster.Config{Brokers: sasl.Addrs()}, cluster.ErrAuthentication, "it probably requires SASL"},
		{"plain ok", cluster.Config{Brokers: plainSASL.Addrs(), SASLMechanism: cluster.MechanismPlain, SASLUser: "bob", SASLPassword: "right"}, nil, ""},
		{"plain wrong password", cluster.Config{Brokers: plainSASL.Addrs(), SASLMechanism: cluster.MechanismPlain, SASLUser: "bob", SASLPassword: "x"}, cluster.ErrAuthentication, "authentication failed: wrong user or password"},
		{"tls ok", cluster.Config{Brokers: tlsB.Addrs(), TLS: true, TLSCAFile: caFile}, nil, ""},
		{"untrusted cert", cluster.Config{Brokers: tlsB.Addrs(), TLS: true}, cluster.ErrTLS, "TLS handshake: certificate of broker"},
		{"other CA", cluster.Config{Brokers: tlsB.Addrs(), TLS: true, TLSCAFile: otherCA}, cluster.ErrTLS, "signed by an authority not trusted here"},
		{"plaintext to tls", cluster.Config{Brokers: tlsB.Addrs()}, cluster.ErrTLS, "it probably requires TLS"},
		{"tls to plaintext", cluster.Config{Brokers: plain.Addrs(), TLS: true, TLSCAFile: caFile}, cluster.ErrTLS, "TLS handshake"},
		{"down", cluster.Config{Brokers: []string{"127.0.0.1:1"}}, cluster.ErrUnreachable, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := cluster.Diagnose(ctx, tc.cfg)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Diagnose: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Diagnose: %v; want %v with %q", err, tc.want, tc.msg)
			}
			if cluster.Permanent(err) == errors.Is(err, cluster.ErrUnreachable) {
				t.Errorf("Permanent(%v) = %v", err, cluster.Permanent(err))
			}
		})
	}
}
