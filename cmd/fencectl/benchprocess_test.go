package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeOccupancyEnv makes the test binary, started by `bench occupancy
// --exec`, a fake occupancy binary (fakeOccupancy) instead of running the
// tests.
const fakeOccupancyEnv = "FENCECTL_TEST_FAKE_OCCUPANCY"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeOccupancyEnv); mode != "" {
		os.Exit(fakeOccupancy(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeOccupancy is an occupancy binary that never does its work: "exit"
// refuses to start, "never" never gets ready, "idle" is ready and applies
// nothing, "short" reports one trigger of FAKE_N a duplicate. It writes its
// pid to FAKE_PIDFILE and runs until SIGTERM.
func fakeOccupancy(mode string, args []string) int {
	if f := os.Getenv(fakeOccupancyEnv + "_PIDFILE"); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "fake occupancy: refusing to start")
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	addr := ""
	if i := slices.Index(args, "--metrics-addr"); i >= 0 && i+1 < len(args) {
		addr = args[i+1]
	}
	if mode != "never" && addr != "" {
		n, _ := strconv.Atoi(os.Getenv(fakeOccupancyEnv + "_N"))
		applied, dup := 0, 0
		if mode == "short" {
			applied, dup = n-1, 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ready") })
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "fencestream_occupancy_triggers_total{result=\"applied\"} %d\n", applied)
			fmt.Fprintf(w, "fencestream_occupancy_triggers_total{result=\"duplicate\"} %d\n", dup)
			fmt.Fprintf(w, "fencestream_occupancy_changes_total{result=\"applied\"} %d\n", applied)
		})
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = http.Serve(l, mux) }()
	}
	<-term
	return 0
}

// buildOccupancy builds cmd/occupancy into a temporary directory.
func buildOccupancy(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build cmd/occupancy with")
	}
	bin := filepath.Join(t.TempDir(), "occupancy")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/fencestream/fencestream/cmd/occupancy").CombinedOutput(); err != nil {
		t.Fatalf("building cmd/occupancy: %v\n%s", err, out)
	}
	return bin
}

// TestBenchOccupancyProcess runs `fencectl bench occupancy` with the real
// binary against `fencectl broker` (both beside the test): every trigger is
// applied exactly once, the figures are there, the state directory is gone
// and the binary stopped. Then fake binaries that never do the work fail
// the bench with the reason, quickly, and are stopped too.
func TestBenchOccupancyProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/occupancy and runs a broker")
	}
	bin := buildOccupancy(t)
	addr, stopBroker := startBroker(t, t.TempDir())
	defer stopBroker()
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var out, errb bytes.Buffer
	args := []string{"occupancy", "--brokers", addr, "--exec", bin, "--triggers", strconv.Itoa(n), "--trigger-devices", "400", "--partitions", "4",
		"--broker-pid", strconv.Itoa(os.Getpid()), "--", "--lag-interval", "5s"}
	if code := runBench(ctx, args, &out, &errb); code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	var res struct {
		Config struct {
			Args []string `json:"args"`
		} `json:"config"`
		Before   int                `json:"applied_before_ready"`
		Timed    int                `json:"triggers_timed"`
		PerSec   float64            `json:"triggers_per_s"`
		CPU      float64            `json:"cpu_us_per_trigger"`
		Results  map[string]float64 `json:"results"`
		ChildCPU float64            `json:"child_cpu_total_s"`
		Broker   float64            `json:"broker_cpu_us_per_trigger"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if res.Results["applied"] != n || res.Results["changes/applied"] != n {
		t.Errorf("results %v: want %d triggers and %d changes applied", res.Results, n, n)
	}
	if res.Before+res.Timed != n || (res.Timed > 0 && res.PerSec <= 0) {
		t.Errorf("%d applied before ready + %d timed at %.0f/s: want %d in all, a rate when any was timed", res.Before, res.Timed, res.PerSec, n)
	}
	if res.Timed > 0 && res.Broker <= 0 {
		// The broker runs in this test's process, busy serving the binary.
		t.Errorf("broker_cpu_us_per_trigger = %v with --broker-pid, want > 0", res.Broker)
	}
	if res.ChildCPU <= 0 {
		t.Errorf("child_cpu_total_s = %v, want > 0", res.ChildCPU)
	}
	if !slices.Equal(res.Config.Args[max(0, len(res.Config.Args)-2):], []string{"--lag-interval", "5s"}) {
		t.Errorf("args %q: the arguments after -- are not passed on", res.Config.Args)
	}
	i := slices.Index(res.Config.Args, "--state-dir")
	if i < 0 || i+1 >= len(res.Config.Args) {
		t.Fatalf("args %q: no --state-dir", res.Config.Args)
	}
	if _, err := os.Stat(res.Config.Args[i+1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir %s after the bench: %v, want it removed", res.Config.Args[i+1], err)
	}
	if j := slices.Index(res.Config.Args, "--metrics-addr"); j >= 0 {
		if c, err := net.DialTimeout("tcp", res.Config.Args[j+1], time.Second); err == nil {
			c.Close()
			t.Errorf("the binary still serves %s after the bench", res.Config.Args[j+1])
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, mode, want string
		extra            []string
	}{
		{"exit", "exit", "refusing to start", nil},
		{"never", "never", "not ready", nil},
		{"idle", "idle", "then nothing for 2s", nil},
		{"short", "short", "applied 1999", nil},
		// --record-cache is given only to a binary whose --help lists it.
		{"no-record-cache", "exit", "lists no --record-cache flag", []string{"--record-cache", "1000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			t.Setenv(fakeOccupancyEnv, c.mode)
			t.Setenv(fakeOccupancyEnv+"_N", strconv.Itoa(n))
			t.Setenv(fakeOccupancyEnv+"_PIDFILE", pidFile)
			var out, errb bytes.Buffer
			start := time.Now()
			args := []string{"occupancy", "--brokers", addr, "--exec", self, "--triggers", strconv.Itoa(n), "--trigger-devices", "400",
				"--partitions", "4", "--ready-timeout", "2s", "--stall-timeout", "2s"}
			args = append(args, c.extra...)
			code := runBench(ctx, args, &out, &errb)
			if code != exitFailure || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, want %d with %q\nstderr:\n%s", code, exitFailure, c.want, errb.String())
			}
			if el := time.Since(start); el > time.Minute {
				t.Errorf("failed after %v: want well within a minute", el)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the fake never started: %v", err)
			}
			pid, _ := strconv.Atoi(string(b))
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("fake binary %d still there after the bench: %v", pid, err)
			}
		})
	}
}
