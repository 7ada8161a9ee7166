package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/dirlock"
)

// TestHelperHoldsStateDir is the other process of
// TestResetRefusesAStateDirInUse: it locks the directory as a processor does
// and holds it until its stdin closes.
func TestHelperHoldsStateDir(t *testing.T) {
	dir := os.Getenv("FENCECTL_HOLD_STATE_DIR")
	if dir == "" {
		t.Skip("helper process")
	}
	if _, err := dirlock.Acquire(dir); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	_, _ = os.Stdin.Read(make([]byte, 1))
}

// TestResetRefusesAStateDirInUse: a debouncer paused with SIGSTOP is no
// member of its group but still holds its state directory; reset refuses,
// naming the pid, before it deletes a changelog record or a file. On main it
// exited 0, emptied the changelog and removed the directory under the process.
func TestResetRefusesAStateDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	addr := withTopology(t, 1)
	kc, _ := admin(t, addr)
	if err := kc.ProduceSync(context.Background(), &kgo.Record{Topic: geofence.TopicDebouncer, Key: []byte("car-1"), Value: []byte("state")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	gdir := filepath.Join(stateDir, geofence.GroupDebouncer)
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{stateMarker, "000001.ldb"} {
		if err := os.WriteFile(filepath.Join(gdir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsStateDir$")
	cmd.Env = append(os.Environ(), "FENCECTL_HOLD_STATE_DIR="+gdir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // SIGKILL ends a stopped process too
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	before := listing(t, stateDir)

	code, stdout, errs := fencectl(t, "reset", "--group", geofence.GroupDebouncer, "--to-earliest", "--partitions", "1",
		"--state-dir", stateDir, "--brokers", addr)
	wantCode(t, code, exitFailure, stdout, errs)
	wantContains(t, errs, "reset refused", gdir, "pid "+strconv.Itoa(cmd.Process.Pid))
	if after := listing(t, stateDir); after != before {
		t.Errorf("the refused reset changed the state directory:\nbefore %s\nafter  %s", before, after)
	}
	_, adm := admin(t, addr)
	starts, err := adm.ListStartOffsets(context.Background(), geofence.TopicDebouncer)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("the refused reset deleted %s/%d up to %d", o.Topic, o.Partition, o.Offset)
		}
	})

	// Once the process is gone, the same reset goes through.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	code, stdout, errs = fencectl(t, "reset", "--group", geofence.GroupDebouncer, "--to-earliest", "--partitions", "1",
		"--state-dir", stateDir, "--brokers", addr)
	wantCode(t, code, exitOK, stdout, errs)
	if _, err := os.Stat(gdir); !os.IsNotExist(err) {
		t.Fatalf("state directory still there after the reset: %v", err)
	}
}

// listing is every file under dir with its size and modification time.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var s string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		s += path + " " + strconv.FormatInt(info.Size(), 10) + " " + strconv.FormatInt(info.ModTime().UnixNano(), 10) + ";"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
