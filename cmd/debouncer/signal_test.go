//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
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

// TestMainProcess is the binary when run by the tests below.
func TestMainProcess(t *testing.T) {
	if os.Getenv("DEBOUNCER_MAIN_PROCESS") != "1" {
		t.Skip("helper process")
	}
	os.Args = append([]string{"debouncer"}, strings.Fields(os.Getenv("DEBOUNCER_ARGS"))...)
	main()
}

func child(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMainProcess$")
	cmd.Env = append(os.Environ(), "DEBOUNCER_MAIN_PROCESS=1", "DEBOUNCER_ARGS="+strings.Join(args, " "), "FENCESTREAM_BROKERS=")
	return cmd
}

// runChild runs a child to completion within a deadline and returns its
// combined output and exit code.
func runChild(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := child(ctx, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within 90s:\n%s", args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out), code
}

func TestExitCodes(t *testing.T) {
	out, code := runChild(t, "--help")
	if code != 0 || !strings.Contains(out, "Usage: debouncer") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	out, code = runChild(t, "--brokers", "127.0.0.1:1")
	if code != 2 || !strings.Contains(out, "debouncer: --state-dir is required") {
		t.Errorf("without --state-dir: exit %d\n%s", code, out)
	}
}

var metricsURL = regexp.MustCompile(`msg="metrics listening" url=(http://127\.0\.0\.1:\d+/metrics)`)

func scrape(url string) string {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestSIGTERMStopsCleanly runs the binary against an embedded broker, finds
// its metrics address in the log (it listens on 127.0.0.1:0), sees a ping
// processed in /metrics, sends SIGTERM and expects exit 0 with "debouncer
// stopped". A second run declaring 6 partitions against the same broker (whose
// topics have the default 24) is refused with the topic and both counts.
func TestSIGTERMStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t)
	brokers := strings.Join(b.Addrs(), ",")

	cmd := child(context.Background(), "--brokers", brokers, "--state-dir", t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // no-op after a clean exit
	logs := &embeddedtest.SyncBuffer{}
	urlc := make(chan string, 1)
	ready := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stderr)
		readySeen := false
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n")) //nolint:errcheck // in memory
			if m := metricsURL.FindStringSubmatch(line); m != nil {
				urlc <- m[1]
			}
			if !readySeen && strings.Contains(line, "debouncer ready") {
				readySeen = true
				close(ready)
			}
		}
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(60 * time.Second):
		t.Fatalf("no metrics address logged within 60s:\n%s", logs)
	}
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("child not ready within 60s:\n%s", logs)
	}

	// One ping, produced with franz-go (murmur2, like any Java-compatible
	// producer), is processed by the binary.
	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ping, err := proto.Marshal(&geofencepb.Ping{DeviceId: "dev-1", Lat: 52.5, Lon: 13.4, AccuracyM: 5, DeviceTimeMs: time.Now().UnixMilli(), Hlc: 1})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	if err := kc.ProduceSync(pctx, &kgo.Record{Topic: geofence.TopicPings, Key: []byte("dev-1"), Value: ping}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		body := scrape(url)
		if strings.Contains(body, "fencestream_") && strings.Contains(body, "\nfencestream_pings_processed_total 1\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the ping processed:\n%s\nlogs:\n%s", body, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		<-drained // Wait must not close the pipe before the log is read
		errc <- cmd.Wait()
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not stop within 60s of SIGTERM:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "debouncer stopped") {
		t.Errorf("no \"debouncer stopped\" line:\n%s", logs)
	}
	if body := scrape(url); strings.Contains(body, "fencestream_") {
		t.Errorf("metrics still served after exit")
	}

	out, code := runChild(t, "--brokers", brokers, "--state-dir", t.TempDir(), "--partitions", "6", "--metrics-addr", "127.0.0.1:0")
	if code != 1 {
		t.Fatalf("--partitions 6 against 24-partition topics: exit %d, want 1\n%s", code, out)
	}
	for _, w := range []string{`topic "pings" has 24 partitions on the broker but the topology declares 6`, "refusing to start"} {
		if !strings.Contains(out, w) {
			t.Errorf("refusal does not say %q:\n%s", w, out)
		}
	}
}
