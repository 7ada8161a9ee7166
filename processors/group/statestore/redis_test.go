package statestore_test

import (
	"bytes"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/group/statestore"
)

// redisServer starts Debian's redis-server on 127.0.0.1 at a free port, with
// no persistence and its files in a temporary directory, and stops it when
// the test ends. A missing redis-server fails the test: CI installs it
// (.ci/run).
func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (Debian package redis-server: apt-get install -y redis-server): %v", err)
	}
	dir := t.TempDir()
	// A port found free can be taken before redis-server binds it: try again.
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		var out bytes.Buffer
		cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone if the test binary dies
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			select {
			case <-exited:
			default:
				if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
					_ = c.Close()
					t.Cleanup(func() {
						_ = cmd.Process.Signal(syscall.SIGTERM)
						select {
						case <-exited:
						case <-time.After(10 * time.Second):
							_ = cmd.Process.Kill()
							<-exited
						}
					})
					return addr
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					<-exited
					t.Fatalf("redis-server did not accept connections on %s within 10 s:\n%s", addr, out.String())
				}
				time.Sleep(20 * time.Millisecond) // polling the server's listen, bounded by the deadline
				continue
			}
			t.Logf("redis-server exited before listening on %s (attempt %d):\n%s", addr, attempt+1, out.String())
			break
		}
	}
	t.Fatal("redis-server did not start in 5 attempts")
	return ""
}

// TestRedisStore runs the Redis store through the checks every local store
// passes, against a real redis-server, then checks that tables are kept
// apart by topic, partition and namespace.
func TestRedisStore(t *testing.T) {
	addr := redisServer(t)
	b, err := statestore.Builder(statestore.Redis, "", statestore.RedisServer(addr, "test"))
	if err != nil {
		t.Fatal(err)
	}
	behavesLikeGokas(t, statestore.Redis, b)

	// open(t, b) is table 3 of "table", holding a, ab and b after the checks.
	for _, c := range []struct {
		name    string
		ns      string
		topic   string
		part    int32
		wantNil bool
	}{
		{"same table", "test", "table", 3, false},
		{"other partition", "test", "table", 4, true},
		{"other topic", "test", "table2", 3, true},
		{"other namespace", "test2", "table", 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := statestore.Builder(statestore.Redis, "", statestore.RedisServer(addr, c.ns))
			if err != nil {
				t.Fatal(err)
			}
			s, err := b(c.topic, c.part)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Open(); err != nil {
				t.Fatal(err)
			}
			v, err := s.Get("ab")
			if err != nil {
				t.Fatal(err)
			}
			if (v == nil) != c.wantNil {
				t.Fatalf("Get(ab) = %q; want nil: %v", v, c.wantNil)
			}
			o, err := s.GetOffset(-1)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{true: -1, false: 42}[c.wantNil]; o != want {
				t.Fatalf("GetOffset = %d, want %d", o, want)
			}
		})
	}
}

// TestRedisNeedsServer: the kind refuses to build without a server, and a
// server that does not answer fails Open, naming the address.
func TestRedisNeedsServer(t *testing.T) {
	if _, err := statestore.Builder(statestore.Redis, ""); err == nil {
		t.Fatal("Builder(Redis) without RedisServer succeeded")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	b, err := statestore.Builder(statestore.Redis, "", statestore.RedisServer(addr, "x"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := b("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Open(); err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open against no server: %v; want an error naming %s", err, addr)
	}
}
