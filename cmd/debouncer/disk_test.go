//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang/protobuf/proto"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// smallDisk mounts a tmpfs of mb MB on a new directory (unmounted at
// cleanup), or skips the test saying why it cannot.
func smallDisk(t *testing.T, mb int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mb), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %d MB tmpfs on %s (%v: %s)", mb, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes a file in dir until at most leave bytes are free.
func fillDisk(t *testing.T, dir string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "filler"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * st.Bsize
		if free <= leave {
			return
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), free-leave)]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// proc is a debouncer child process whose log is collected.
type proc struct {
	cmd  *exec.Cmd
	logs *embeddedtest.SyncBuffer
	url  chan string // the metrics address, once logged
	done chan int    // the exit code, once exited
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := child(context.Background(), append(args, "--metrics-addr", "127.0.0.1:0")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, logs: &embeddedtest.SyncBuffer{}, url: make(chan string, 1), done: make(chan int, 1)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n")) //nolint:errcheck // in memory
			if m := metricsURL.FindStringSubmatch(line); m != nil {
				p.url <- strings.TrimSuffix(m[1], "/metrics")
			}
		}
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = -int(ws.Signal())
			}
		}
		p.done <- code
	}()
	return p
}

// wait is the exit code within d, or fails the test.
func (p *proc) wait(t *testing.T, d time.Duration, what string) int {
	t.Helper()
	select {
	case code := <-p.done:
		p.done <- code
		return code
	case <-time.After(d):
		t.Fatalf("%s: still running after %v:\n%s", what, d, p.logs)
		return 0
	}
}

// readyz is /readyz's status and body (0 when nothing answers).
func readyz(base string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// untilReady waits for the metrics address and /readyz 200.
func (p *proc) untilReady(t *testing.T) string {
	t.Helper()
	var base string
	select {
	case base = <-p.url:
	case code := <-p.done:
		t.Fatalf("exited %d before listening:\n%s", code, p.logs)
	case <-time.After(90 * time.Second):
		t.Fatalf("no metrics address within 90 s:\n%s", p.logs)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := readyz(base); code == http.StatusOK {
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within 90 s:\n%s", p.logs)
		}
	}
}

// untilNotReady polls /readyz without pause until it answers 503 naming dir,
// and returns what it said. The binary stops within milliseconds of turning
// not ready, so a poll may not land in between: then its log must show the
// storage failure before the stop (Ready reads the failure the store reports
// there, before Goka is stopped).
func (p *proc) untilNotReady(t *testing.T, base, dir string, d time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(d); ; {
		code, body := readyz(base)
		switch {
		case code == http.StatusServiceUnavailable && strings.Contains(body, dir):
			return "503 " + strings.TrimSpace(body)
		case code == 0:
			p.wait(t, 30*time.Second, "stopping")
			logs := p.logs.String()
			i, j := strings.Index(logs, "state directory cannot be written; stopping"), strings.Index(logs, "processor stopped with error")
			if i < 0 || j < i {
				t.Fatalf("stopped (%s) with no storage failure logged before the stop:\n%s", body, logs)
			}
			return "(stopped before a poll landed; the failure was logged first)"
		case code == http.StatusOK && time.Now().After(deadline):
			t.Fatalf("/readyz still 200 after %v:\n%s", d, p.logs)
		}
	}
}

// producePings sends n pings for 60 devices.
func producePings(t *testing.T, kc *kgo.Client, n int, hlc uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		dev := fmt.Sprintf("dev-%02d", i%60)
		v, err := proto.Marshal(&geofencepb.Ping{DeviceId: dev, Lat: 52.5, Lon: 13.4, AccuracyM: 5, DeviceTimeMs: time.Now().UnixMilli(), Hlc: hlc + uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(dev), Value: v})
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkCleanStop: exit 1, the output names dir, the free space or cause,
// and the fix, and has no panic or Go runtime fatal.
func checkCleanStop(t *testing.T, p *proc, code int, dir string, want ...string) {
	t.Helper()
	out := p.logs.String()
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, w := range append([]string{dir, "make it writable"}, want...) {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q", w)
		}
	}
	for _, bad := range []string{"panic", "fatal error", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q", bad)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}
}

// TestFullDisk runs the binary on a small tmpfs: full at start-up, it exits
// 1 saying which directory has how much free and how to fix it; filled while
// it runs, /readyz turns 503 with that reason and it exits the same way, with
// no panic and no Go runtime fatal (on main: "fatal error: sync: unlock of
// unlocked mutex" in Pebble's rotateWAL, or a Close that hangs for good).
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t)
	brokers := strings.Join(b.Addrs(), ",")
	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()

	t.Run("at start-up", func(t *testing.T) {
		disk := smallDisk(t, 16)
		fillDisk(t, disk, 1<<20)
		p := startProc(t, "--brokers", brokers, "--state-dir", filepath.Join(disk, "state"))
		code := p.wait(t, 90*time.Second, "full at start-up")
		checkCleanStop(t, p, code, disk, "free")
	})

	t.Run("no byte free at start-up", func(t *testing.T) {
		disk := smallDisk(t, 16)
		fillDisk(t, disk, 0)
		p := startProc(t, "--brokers", brokers, "--state-dir", filepath.Join(disk, "state"))
		code := p.wait(t, 90*time.Second, "no byte free at start-up")
		checkCleanStop(t, p, code, disk, "no space left on device")
	})

	t.Run("while running", func(t *testing.T) {
		disk := smallDisk(t, 64)
		p := startProc(t, "--brokers", brokers, "--state-dir", filepath.Join(disk, "state"))
		base := p.untilReady(t)
		producePings(t, kc, 600, 1)
		time.Sleep(500 * time.Millisecond) // let some of them reach the tables: not a condition, load
		filled := time.Now()
		fillDisk(t, disk, 1<<20)
		notReady := p.untilNotReady(t, base, disk, 60*time.Second)
		sawNotReady := time.Since(filled)
		code := p.wait(t, 60*time.Second, "filled while running")
		stopped := time.Since(filled)
		checkCleanStop(t, p, code, disk, "free")
		t.Logf("disk filled → /readyz answer %v later, exit 1 %v later; /readyz said: %s", sawNotReady.Round(time.Millisecond), stopped.Round(time.Millisecond), notReady)
	})
}

// TestUnwritableStateDir: table directories that turn immutable under a
// running binary make /readyz 503 naming them within a second, and SIGTERM
// then ends the process within seconds, cleanly.
func TestUnwritableStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for chattr +i")
	}
	b := embeddedtest.Start(t)
	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	state := t.TempDir()
	p := startProc(t, "--brokers", strings.Join(b.Addrs(), ","), "--state-dir", state)
	base := p.untilReady(t)
	producePings(t, kc, 120, 1)
	tables, _ := filepath.Glob(filepath.Join(state, "debouncer", "*.pebble"))
	if len(tables) == 0 {
		t.Fatalf("no tables under %s", state)
	}
	for _, tbl := range tables {
		if out, err := exec.Command("chattr", "+i", tbl).CombinedOutput(); err != nil {
			t.Skipf("chattr +i %s: %v: %s", tbl, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", tbl).Run() })
	}
	made := time.Now()
	notReady := p.untilNotReady(t, base, state, 30*time.Second)
	t.Logf("%v after the tables turned immutable, /readyz said: %s", time.Since(made).Round(time.Millisecond), notReady)
	signalled := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may be stopping by itself already
	code := p.wait(t, 20*time.Second, "SIGTERM after the state directory failed")
	t.Logf("exit %d %v after SIGTERM", code, time.Since(signalled).Round(time.Millisecond))
	checkCleanStop(t, p, code, state)
}
