//go:build unix

package chaostest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinaries compiles the binaries the test runs as child processes into
// dir, in one go build. They are built without -race even under `go test
// -race`: five race-instrumented processes would not fit the time budget on
// two cores, and the race detector watches this test's own process.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/fencestream/fencestream/cmd/fencectl",
		"github.com/fencestream/fencestream/cmd/debouncer",
		"github.com/fencestream/fencestream/cmd/occupancy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built fencectl, debouncer, occupancy in %v", time.Since(start).Round(time.Millisecond))
}

// childEnv is the environment of the children: without FENCESTREAM_*
// settings of the caller, so only the flags the test gives apply.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FENCESTREAM_") {
			env = append(env, kv)
		}
	}
	return env
}

// proc is one long-running child (the broker or a processor). It can be
// started again after it ended, with the same arguments (so the same state
// directory). Its stderr and stdout from every run are appended to one log
// file. Supervised, it is restarted when it exits on its own, as systemd or
// Kubernetes would restart it; such exits are counted.
type proc struct {
	name string
	bin  string
	args []string
	log  string // path of the log
	// addrOnStdout: ready when the first stdout line is printed (the broker's
	// address). Processors have no ready signal of their own: Goka's
	// WaitForReady, behind their "ready" log line, can wait forever when a
	// rebalance replaces its partitions during start-up, so the test watches
	// their consumer group instead.
	addrOnStdout bool
	// beforeRestart, if set, runs before the process is ended to be
	// restarted, or restarted after it ended on its own.
	beforeRestart func()

	op sync.Mutex // serializes start, kill and stop

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{} // closed when the current run has ended
	waitErr   error
	ready     chan struct{} // closed when the current run logged marker
	stdout    *lineWatcher
	runs      int
	expected  bool // the test ended the current run
	supervise bool
	crashes   []string
}

// newProc defines a child whose log goes to logDir (a temporary directory
// when empty).
func newProc(t *testing.T, logDir, name, bin string, addrOnStdout bool, args ...string) *proc {
	if logDir == "" {
		logDir = t.TempDir()
	}
	p := &proc{name: name, bin: bin, args: args, addrOnStdout: addrOnStdout, log: filepath.Join(logDir, name+".log")}
	// Registered before the first start: whatever happens, the process group
	// is killed before the test's directories are removed.
	t.Cleanup(p.killGroup)
	return p
}

// start runs the process again; it must not be running.
func (p *proc) start() error {
	p.op.Lock()
	defer p.op.Unlock()
	return p.startLocked()
}

func (p *proc) startLocked() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil && !closed(p.done) {
		return fmt.Errorf("%s: started while running", p.name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.runs++
	run := p.runs
	fmt.Fprintf(f, "===== %s run %d at %s: %s %s\n", p.name, run, time.Now().Format("15:04:05.000"), filepath.Base(p.bin), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = childEnv()
	// A group of its own: the cleanup kills it and anything it started, and a
	// Ctrl-C of `go test` does not reach it before the test can stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ready := make(chan struct{})
	out := &lineWatcher{w: f}
	if p.addrOnStdout {
		out.matched = ready
	}
	cmd.Stderr, cmd.Stdout = f, out
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.ready, p.stdout, p.waitErr, p.expected = cmd, done, ready, out, nil, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "===== %s run %d ended at %s: %s\n", p.name, run, time.Now().Format("15:04:05.000"), exitText(err))
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		crashed := !p.expected && p.supervise
		if crashed {
			p.crashes = append(p.crashes, fmt.Sprintf("run %d at %s: %s", run, time.Now().Format("15:04:05"), exitText(err)))
		}
		p.mu.Unlock()
		close(done)
		if crashed {
			p.op.Lock()
			defer p.op.Unlock()
			p.mu.Lock()
			again := p.done == done && p.supervise // nobody started it since
			p.mu.Unlock()
			if again {
				if p.beforeRestart != nil {
					p.beforeRestart()
				}
				_ = p.startLocked()
			}
		}
	}()
	return nil
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func (p *proc) current() (cmd *exec.Cmd, done, ready chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done, p.ready
}

// setSupervised turns restarting after an exit of its own on or off.
func (p *proc) setSupervised(on bool) {
	p.mu.Lock()
	p.supervise = on
	p.mu.Unlock()
}

// waitReady waits until the current run has printed its address.
func (p *proc) waitReady(timeout time.Duration) error {
	_, done, ready := p.current()
	select {
	case <-ready:
		return nil
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("%s ended before it was ready (%s)", p.name, exitText(p.waitErr))
	case <-time.After(timeout):
		return fmt.Errorf("%s not ready within %v%s", p.name, timeout, p.dumpStacks())
	}
}

// dumpStacks makes a hung run print its goroutines (SIGQUIT) into its log and
// end, and says so.
func (p *proc) dumpStacks() string {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if closed(done) {
		p.mu.Unlock()
		return ""
	}
	p.expected = true
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return ""
	}
	select {
	case <-done:
		return fmt.Sprintf(" (its goroutines, dumped with SIGQUIT, are in %s)", p.log)
	case <-time.After(10 * time.Second):
		return ""
	}
}

func (p *proc) sameRun(done chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done == done
}

// end signals the current run (if it is still going) and waits until it has
// ended; the exit is expected.
func (p *proc) end(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	running := !closed(done)
	if running {
		p.expected = true
	}
	p.mu.Unlock()
	if !running {
		return nil
	}
	pid := cmd.Process.Pid
	if sig == syscall.SIGKILL {
		pid = -pid // the whole group
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%v %s: %w", sig, p.name, err)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return fmt.Errorf("%s still running %v after %v", p.name, timeout, sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sig != syscall.SIGKILL && p.waitErr != nil {
		return fmt.Errorf("%s after %v: %s", p.name, sig, exitText(p.waitErr))
	}
	return nil
}

// kill9 sends SIGKILL, waits until the process is gone and starts it again.
func (p *proc) kill9() error {
	p.op.Lock()
	defer p.op.Unlock()
	if p.beforeRestart != nil {
		p.beforeRestart()
	}
	if err := p.end(syscall.SIGKILL, 30*time.Second); err != nil {
		return err
	}
	return p.startLocked()
}

// kill9Then sends SIGKILL, waits until the process is gone, runs between
// (a fault injected while it is down) and starts it again.
func (p *proc) kill9Then(between func() error) error {
	p.op.Lock()
	defer p.op.Unlock()
	if p.beforeRestart != nil {
		p.beforeRestart()
	}
	if err := p.end(syscall.SIGKILL, 30*time.Second); err != nil {
		return err
	}
	if err := between(); err != nil {
		return err
	}
	return p.startLocked()
}

// stateDir is the value of the process's --state-dir flag.
func (p *proc) stateDir() string {
	for i, a := range p.args {
		if a == "--state-dir" && i+1 < len(p.args) {
			return p.args[i+1]
		}
	}
	return ""
}

// restart sends SIGTERM, waits for the exit and starts the process again. A
// stop that is not clean is returned (after the restart).
func (p *proc) restart(timeout time.Duration) error {
	p.op.Lock()
	defer p.op.Unlock()
	if p.beforeRestart != nil {
		p.beforeRestart()
	}
	stopErr := p.end(syscall.SIGTERM, timeout)
	if err := p.startLocked(); err != nil {
		return errors.Join(stopErr, err)
	}
	return stopErr
}

// stop ends supervision and stops the process with SIGTERM: a clean stop is
// nil.
func (p *proc) stop(timeout time.Duration) error {
	p.setSupervised(false)
	p.op.Lock()
	defer p.op.Unlock()
	return p.end(syscall.SIGTERM, timeout)
}

// killGroup kills the process group of a run still going and waits for it.
func (p *proc) killGroup() {
	p.setSupervised(false)
	p.op.Lock()
	defer p.op.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.end(syscall.SIGKILL, 30*time.Second)
}

// crashLog lists the runs that ended on their own.
func (p *proc) crashLog() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.crashes...)
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines in %s)", len(lines)-n, p.log)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// lineWatcher copies a child's output to w and keeps its first line; it
// closes matched (if set) once it has it.
type lineWatcher struct {
	w       interface{ Write([]byte) (int, error) }
	matched chan struct{}

	mu    sync.Mutex
	buf   []byte
	first string
	seen  bool
}

func (l *lineWatcher) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen {
		l.buf = append(l.buf, b...)
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 {
			l.first, l.seen, l.buf = string(l.buf[:i]), true, nil
			if l.matched != nil {
				close(l.matched)
			}
		}
	}
	return l.w.Write(b)
}

// line is the matched line, once matched is closed.
func (l *lineWatcher) line() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// firstStdoutLine is the first line the current run printed on stdout (the
// broker's address), once waitReady has returned.
func (p *proc) firstStdoutLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.stdout.line())
}

// runOnce runs a short-lived command to completion and fails the test if it
// does not exit 0 within the timeout.
func runOnce(t *testing.T, timeout time.Duration, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
		}
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%s %s: not done within %v\n%s", filepath.Base(bin), strings.Join(args, " "), timeout, out.String())
	}
	return out.String()
}
