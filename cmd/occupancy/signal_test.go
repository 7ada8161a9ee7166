//go:build unix

package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestMainProcess is the binary when run by TestSIGTERMStopsCleanly.
func TestMainProcess(t *testing.T) {
	if os.Getenv("OCCUPANCY_MAIN_PROCESS") != "1" {
		t.Skip("helper process")
	}
	os.Args = append([]string{"occupancy"}, strings.Fields(os.Getenv("OCCUPANCY_ARGS"))...)
	main()
}

// TestSIGTERMStopsCleanly runs main in a child process, sends it SIGTERM once
// the processor is ready, and expects a clean exit with status 0; a run without
// --state-dir exits non-zero with the reason on stderr.
func TestSIGTERMStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t)
	child := func(args string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "OCCUPANCY_MAIN_PROCESS=1", "OCCUPANCY_ARGS="+args)
		return cmd
	}

	out, err := child("--brokers " + b.Addrs()[0]).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "occupancy: --state-dir is required") {
		t.Fatalf("without --state-dir: %v\n%s", err, out)
	}

	cmd := child("--brokers " + b.Addrs()[0] + " --state-dir " + t.TempDir() + " --partitions 6 --metrics-addr 127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // no-op after a clean exit
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "occupancy ready") {
				close(ready)
				break
			}
		}
		for sc.Scan() { // keep draining
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("child not ready within 30s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not stop within 30s of SIGTERM")
	}
}
