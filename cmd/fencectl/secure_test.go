package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/cluster"
)

// writePKI writes a throwaway CA and a server certificate for 127.0.0.1
// signed by it, and a second CA that signed nothing.
func writePKI(t *testing.T, dir string) (caFile, otherCAFile, certFile, keyFile string) {
	t.Helper()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := x509.ParseCertificate(der)
		return ca, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	ca, caKey, caPEM := newCA("fencestream test CA")
	_, _, otherPEM := newCA("another CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	files := map[string][]byte{
		"ca.pem": caPEM, "other-ca.pem": otherPEM,
		"server.pem":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"server-key.pem": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
}

// child runs a built binary; it is killed when the test ends.
func child(t *testing.T, bin string, args ...string) (*exec.Cmd, *bufio.Reader, *lockedBuilder) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuilder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(stdout), stderr
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPipelineOverSASLAndTLS runs fencectl broker, cmd/debouncer and
// cmd/occupancy as processes over SASL/SCRAM and over TLS: pings produced
// with the same settings reach the occupancy table. Wrong settings are each
// reported as what they are (issue 17, item 7: they were "unreachable: EOF").
func TestPipelineOverSASLAndTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	bins := t.TempDir()
	build := exec.Command("go", "build", "-o", bins+string(filepath.Separator),
		"github.com/fencestream/fencestream/cmd/fencectl",
		"github.com/fencestream/fencestream/cmd/debouncer",
		"github.com/fencestream/fencestream/cmd/occupancy")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin := func(name string) string { return filepath.Join(bins, name) }
	caFile, otherCA, certFile, keyFile := writePKI(t, t.TempDir())

	for _, mode := range []struct {
		name     string
		broker   []string
		client   []string
		wrong    map[string][]string // a wrong client setting -> the message it must give
		clientCf func(addr string) cluster.Config
	}{
		{
			name:   "sasl-scram",
			broker: []string{"--sasl-user", "SCRAM-SHA-256:fencestream:s3cret"},
			client: []string{"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "fencestream", "--sasl-password", "s3cret"},
			wrong: map[string][]string{
				`authentication failed: wrong password for user "fencestream"`: {"--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "fencestream", "--sasl-password", "wrong"},
				`SASL mechanism: broker`:    {"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "fencestream", "--sasl-password", "s3cret"},
				`it probably requires SASL`: {},
			},
			clientCf: func(addr string) cluster.Config {
				return cluster.Config{Brokers: []string{addr}, SASLMechanism: "SCRAM-SHA-256", SASLUser: "fencestream", SASLPassword: "s3cret"}
			},
		},
		{
			name:   "tls",
			broker: []string{"--tls-cert", certFile, "--tls-key", keyFile},
			client: []string{"--tls", "--tls-ca", caFile},
			wrong: map[string][]string{
				"TLS handshake: certificate of broker": {"--tls", "--tls-ca", otherCA},
				"it probably requires TLS":             {},
			},
			clientCf: func(addr string) cluster.Config {
				return cluster.Config{Brokers: []string{addr}, TLS: true, TLSCAFile: caFile}
			},
		},
	} {
		t.Run(mode.name, func(t *testing.T) {
			_, out, berr := child(t, bin("fencectl"), append([]string{"broker", "--data", t.TempDir()}, mode.broker...)...)
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("broker printed no address: %v\n%s", err, berr.String())
			}
			addr := strings.TrimSpace(line)
			flags := append([]string{"--brokers", addr}, mode.client...)
			for want, wrong := range mode.wrong {
				cmd := exec.Command(bin("fencectl"), append([]string{"topology", "check", "--timeout", "5s", "--brokers", addr}, wrong...)...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
				b, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(b), want) || strings.Contains(string(b), "unreachable") {
					t.Errorf("fencectl with %q: %v\n%s\nwant %q, not unreachable", wrong, err, b, want)
				}
			}
			run := func(args ...string) {
				cmd := exec.Command(bin("fencectl"), append(args, flags...)...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("fencectl %q: %v\n%s", args, err, b)
				}
			}
			run("topology", "check", "--create", "--partitions", "2")
			run("fences", "load", "--demo")
			_, _, derr := child(t, bin("debouncer"), append([]string{"--partitions", "2", "--state-dir", t.TempDir(), "--metrics-addr", ""}, flags...)...)
			_, _, oerr := child(t, bin("occupancy"), append([]string{"--partitions", "2", "--state-dir", t.TempDir(), "--metrics-addr", ""}, flags...)...)

			// A device parked in the middle of station-zoo.
			kopts, err := mode.clientCf(addr).Kgo()
			if err != nil {
				t.Fatal(err)
			}
			kc, err := kgo.NewClient(append(kopts, kgo.DefaultProduceTopic(geofence.TopicPings))...)
			if err != nil {
				t.Fatal(err)
			}
			defer kc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			codec := codecs.For[pb.Ping]()
			base := time.Now().Add(-10 * time.Minute).UnixMilli()
			for i := 0; i < 30; i++ {
				v, _ := codec.Marshal(&pb.Ping{DeviceId: "veh-sec", Lat: 52.5069, Lon: 13.3323, AccuracyM: 3, DeviceTimeMs: base + int64(i)*2000})
				if err := kc.ProduceSync(ctx, &kgo.Record{Key: []byte("veh-sec"), Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cc, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(geofence.TopicOccupancy), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			for {
				f := cc.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("nothing in %s within 2 minutes\ndebouncer:\n%s\noccupancy:\n%s", geofence.TopicOccupancy, derr.String(), oerr.String())
				}
				if f.NumRecords() > 0 {
					return
				}
			}
		})
	}
}
