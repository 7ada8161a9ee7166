package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// Deadlines are generous: a loaded 2-core machine builds, starts Goka groups
// and runs a broker in the same test.
const (
	startDeadline = 90 * time.Second
	stopDeadline  = 60 * time.Second
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/fencestream once per test binary run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fencestream-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "fencestream")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type proc struct {
	cmd  *exec.Cmd
	out  *embeddedtest.SyncBuffer
	done chan struct{}
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), args...), out: &embeddedtest.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of fencestream %s:\n%s", strings.Join(args, " "), tail(p.out.String(), 60))
		}
	})
	return p
}

// tail returns the last n lines of s, without Goka's debug chatter.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "level=DEBUG") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitOutput polls the output until re matches and returns the submatches.
func (p *proc) waitOutput(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := re.FindStringSubmatch(p.out.String()); m != nil {
				return m
			}
			t.Fatalf("fencestream exited (%v) before printing %q", p.cmd.ProcessState, re)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output after %v", re, timeout)
		}
	}
}

// interrupt sends SIGINT and returns the exit code.
func (p *proc) interrupt(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(stopDeadline):
		t.Fatalf("fencestream did not exit within %v", stopDeadline)
		return -1
	}
}

// poll calls fn until it returns true or the deadline passes; fn's last
// message explains the failure.
func poll(t *testing.T, p *proc, timeout time.Duration, what string, fn func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var msg string
	for {
		var ok bool
		if ok, msg = fn(); ok {
			return
		}
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("fencestream exited while waiting for %s (%s)", what, msg)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, timeout, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func get(url string) (int, []byte, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

var (
	reURL   = regexp.MustCompile(`web page\s+(http://127\.0\.0\.1:\d+/)`)
	reKafka = regexp.MustCompile(`Kafka\s+(127\.0\.0\.1:\d+) \(embedded`)
)

type fenceList struct {
	Total  int `json:"total"`
	Fences []struct {
		ID    string `json:"id"`
		Count int64  `json:"count"`
	} `json:"fences"`
}

type deviceJSON struct {
	DeviceID        string `json:"device_id"`
	LastEventTimeMs int64  `json:"last_event_time_ms"`
	LastHLC         uint64 `json:"last_hlc"`
	Fences          []struct {
		FenceID string `json:"fence_id"`
		Phase   string `json:"phase"`
	} `json:"fences"`
}

// waitServing waits for the web page and a ready /v1/fences with the demo set.
func waitServing(t *testing.T, p *proc, url string) {
	t.Helper()
	poll(t, p, startDeadline, "web page", func() (bool, string) {
		code, body, err := get(url)
		if err != nil {
			return false, err.Error()
		}
		return code == 200 && bytes.Contains(bytes.ToLower(body), []byte("<html")), fmt.Sprintf("status %d", code)
	})
	poll(t, p, startDeadline, "/v1/fences", func() (bool, string) {
		code, body, err := get(url + "v1/fences")
		if err != nil {
			return false, err.Error()
		}
		var fl fenceList
		if code != 200 || json.Unmarshal(body, &fl) != nil {
			return false, fmt.Sprintf("status %d: %.200s", code, body)
		}
		return fl.Total == 34, fmt.Sprintf("%d fences", fl.Total)
	})
}

type trig struct {
	device, fence, typ string
	hlc                uint64
	partition          int32
	offset             int64
}

// readTriggers reads fence-triggers to its current end.
func readTriggers(t *testing.T, broker string) []trig {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(geofence.TopicTriggers),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(kc).ListEndOffsets(ctx, geofence.TopicTriggers)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	target := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			target[o.Partition] = o.Offset
		}
	})
	next := map[int32]int64{}
	codec := codecs.For[pb.Trigger]()
	var out []trig
	for {
		done := true
		for p, end := range target {
			if next[p] < end {
				done = false
			}
		}
		if done {
			return out
		}
		fetches := kc.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("reading triggers: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			m, err := codec.Unmarshal(r.Value)
			if err != nil {
				t.Errorf("undecodable trigger at %d/%d: %v", r.Partition, r.Offset, err)
				return
			}
			out = append(out, trig{device: m.GetDeviceId(), fence: m.GetFenceId(),
				typ: strings.TrimPrefix(m.GetType().String(), "TRIGGER_TYPE_"), hlc: m.GetHlc(), partition: r.Partition, offset: r.Offset})
		})
	}
}

// inside replays triggers (in partition order, which is each device's order)
// and reports the (device, fence) pairs inside at the end; it fails on an
// ENTER while already inside.
func inside(t *testing.T, trigs []trig) map[[2]string]trig {
	t.Helper()
	in := map[[2]string]trig{}
	for _, tr := range trigs {
		k := [2]string{tr.device, tr.fence}
		switch tr.typ {
		case "ENTER":
			if prev, dup := in[k]; dup {
				t.Errorf("device %s re-announced ENTER of %s (partition %d offset %d, hlc %d) without an EXIT since the ENTER at offset %d (hlc %d)",
					tr.device, tr.fence, tr.partition, tr.offset, tr.hlc, prev.offset, prev.hlc)
			}
			in[k] = tr
		case "EXIT":
			delete(in, k)
		}
	}
	return in
}

func TestRunStopResume(t *testing.T) {
	data := t.TempDir()
	args := []string{"--data", data, "--listen", "127.0.0.1:0", "--broker-port", "0",
		"--devices", "10", "--parked", "20", "--progress", "2s"}

	// First run: the page and API answer, triggers flow into occupancy.
	p1 := start(t, args...)
	url := p1.waitOutput(t, reURL, startDeadline)[1]
	up := time.Now() // a loaded machine can take long to get here; bounds count from now
	broker := p1.waitOutput(t, reKafka, startDeadline)[1]
	waitServing(t, p1, url)
	if code, body, err := get(url + "v1/config"); err != nil || code != 200 || !strings.Contains(string(body), "tile.openstreetmap.org") {
		t.Errorf("the page's default basemap is not OpenStreetMap's: %d %s %v", code, body, err)
	}
	// The fleet starts warmed up: the first triggers are from event time
	// before the start (sent at once), not a minute or more after it, and
	// the page's recent-trigger list shows them.
	poll(t, p1, startDeadline, "recent triggers", func() (bool, string) {
		code, body, err := get(url + "v1/triggers?limit=500")
		if err != nil {
			return false, err.Error()
		}
		var l struct {
			Triggers []struct {
				EventTimeMs int64 `json:"event_time_ms"`
			} `json:"triggers"`
		}
		if code != 200 || json.Unmarshal(body, &l) != nil || len(l.Triggers) == 0 {
			return false, fmt.Sprintf("status %d: %.200s", code, body)
		}
		first := l.Triggers[len(l.Triggers)-1].EventTimeMs
		if first > up.Add(30*time.Second).UnixMilli() {
			t.Fatalf("the first trigger has event time %v after the process was up: the simulator is quiet at first", time.UnixMilli(first).Sub(up))
		}
		return true, ""
	})
	var top string
	poll(t, p1, startDeadline, "occupancy above 0", func() (bool, string) {
		code, body, err := get(url + "v1/fences?sort=count&order=desc&limit=3")
		if err != nil {
			return false, err.Error()
		}
		var fl fenceList
		if code != 200 || json.Unmarshal(body, &fl) != nil || len(fl.Fences) == 0 {
			return false, fmt.Sprintf("status %d: %.200s", code, body)
		}
		top = fl.Fences[0].ID
		return fl.Fences[0].Count > 0, fmt.Sprintf("top fence %s count %d", fl.Fences[0].ID, fl.Fences[0].Count)
	})
	// The progress line's totals come from the broker, so a restart
	// continues them rather than counting from 0 again.
	var triggersRun1 int64
	poll(t, p1, startDeadline, "a progress line with triggers", func() (bool, string) {
		triggersRun1 = lastTriggersTotal(p1.out.String())
		return triggersRun1 > 0, fmt.Sprintf("triggers=%d", triggersRun1)
	})
	// The visits processor runs beside them: the fence's ENTERs reach its
	// hourly window, served by fenceview.
	poll(t, p1, startDeadline, "ENTERs in the visits of "+top, func() (bool, string) {
		code, body, err := get(url + "v1/fences/" + top + "/visits")
		if err != nil {
			return false, err.Error()
		}
		var v struct {
			Hours []struct {
				Enters int64 `json:"enters"`
			} `json:"hours"`
		}
		if code != 200 || json.Unmarshal(body, &v) != nil {
			return false, fmt.Sprintf("status %d: %.200s", code, body)
		}
		n := int64(0)
		for _, h := range v.Hours {
			n += h.Enters
		}
		return n > 0, fmt.Sprintf("%.300s", body)
	})
	insideAfterRun1 := inside(t, readTriggers(t, broker))
	if len(insideAfterRun1) == 0 {
		t.Fatal("occupancy is above 0 but no device is inside by the triggers")
	}
	if code := p1.interrupt(t); code != 0 {
		t.Fatalf("SIGINT: exit code %d, want 0", code)
	}
	if !strings.Contains(p1.out.String(), "fencestream stopped") {
		t.Error("no clean-stop message")
	}
	var st simState
	data1, err := os.ReadFile(filepath.Join(data, "sim.json"))
	if err == nil {
		err = json.Unmarshal(data1, &st)
	}
	if err != nil {
		t.Fatalf("sim.json: %v", err)
	}
	if st.NextTick <= 0 || st.LastHLC == 0 {
		t.Fatalf("sim.json did not record the fleet's position: %+v", st)
	}

	// Second run resumes: the devices inside stay inside, no ENTER again.
	resumed := time.Now()
	p2 := start(t, args...)
	url = p2.waitOutput(t, reURL, startDeadline)[1]
	broker = p2.waitOutput(t, reKafka, startDeadline)[1]
	p2.waitOutput(t, regexp.MustCompile(`resuming the fleet where it stopped.*tick=\d+`), startDeadline)
	poll(t, p2, startDeadline, "the second run's first progress line", func() (bool, string) {
		n := lastTriggersTotal(p2.out.String())
		if n < 0 {
			return false, "no progress line yet"
		}
		if n < triggersRun1 {
			t.Fatalf("progress after the restart: triggers=%d, the first run had reached %d", n, triggersRun1)
		}
		return true, ""
	})
	waitServing(t, p2, url)
	// Long enough after the restart for a forgotten device to be confirmed
	// inside again (min samples 3 and min dwell 10 s in event time).
	confirmAfter := resumed.Add(15 * time.Second).UnixMilli()
	for k := range insideAfterRun1 {
		device := k[0]
		poll(t, p2, startDeadline, "resumed pings of "+device, func() (bool, string) {
			code, body, err := get(url + "v1/devices/" + device)
			if err != nil {
				return false, err.Error()
			}
			var d deviceJSON
			if code != 200 || json.Unmarshal(body, &d) != nil {
				return false, fmt.Sprintf("status %d: %.200s", code, body)
			}
			if d.LastHLC <= st.LastHLC {
				return false, fmt.Sprintf("last HLC %d not above the first run's %d", d.LastHLC, st.LastHLC)
			}
			return d.LastEventTimeMs >= confirmAfter, fmt.Sprintf("event time %d, waiting for %d", d.LastEventTimeMs, confirmAfter)
		})
	}
	all := readTriggers(t, broker)
	insideNow := inside(t, all) // fails on any ENTER re-announced across both runs
	for k, tr := range insideAfterRun1 {
		now, ok := insideNow[k]
		if !ok {
			continue // it may have truly left since
		}
		if now.offset != tr.offset || now.partition != tr.partition {
			t.Errorf("%s in %s: ENTER at %d/%d after the restart, first run's at %d/%d", k[0], k[1], now.partition, now.offset, tr.partition, tr.offset)
		}
	}
	if code := p2.interrupt(t); code != 0 {
		t.Fatalf("second run, SIGINT: exit code %d, want 0", code)
	}
	t.Logf("%d triggers over both runs; %d (device, fence) pairs inside after the first run", len(all), len(insideAfterRun1))
}

var reProgressTriggers = regexp.MustCompile(`msg=progress .*\btriggers=(\d+)`)

// lastTriggersTotal is the triggers total of the last progress line, -1 when
// there is none.
func lastTriggersTotal(out string) int64 {
	m := reProgressTriggers.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return -1
	}
	var n int64
	fmt.Sscan(m[len(m)-1][1], &n)
	return n
}

func TestStateMismatch(t *testing.T) {
	data := t.TempDir()
	args := []string{"--data", data, "--listen", "127.0.0.1:0", "--broker-port", "0", "--no-sim"}
	ready := regexp.MustCompile(`msg="debouncer ready"`)

	p := start(t, args...)
	p.waitOutput(t, ready, startDeadline)
	if code := p.interrupt(t); code != 0 {
		t.Fatalf("SIGINT: exit code %d, want 0", code)
	}
	// The broker's data goes, the local state stays: they no longer match.
	if err := os.RemoveAll(filepath.Join(data, "broker")); err != nil {
		t.Fatal(err)
	}
	p = start(t, args...)
	if code := p.wait(t); code != exitMismatch {
		t.Fatalf("exit code %d, want %d", code, exitMismatch)
	}
	out := p.out.String()
	for _, want := range []string{"refusing to start", "data in " + filepath.Join(data, "broker") + " is gone",
		"rm -rf " + filepath.Join(data, "state"), "--reset-state"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, tail(out, 30))
		}
	}
	// Refused before anything is announced or written, and without sending
	// the user to changelog topics that went with the broker's data.
	for _, unwanted := range []string{"fencestream is running", "demo fences loaded", "changelog"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("a refused start says %q:\n%s", unwanted, tail(out, 30))
		}
	}
	if _, err := os.Stat(filepath.Join(data, "broker")); !os.IsNotExist(err) {
		t.Errorf("a refused start created %s/broker (%v)", data, err)
	}
	// --reset-state fixes it.
	p = start(t, append(args, "--reset-state")...)
	p.waitOutput(t, ready, startDeadline)
	if code := p.interrupt(t); code != 0 {
		t.Fatalf("--reset-state run, SIGINT: exit code %d, want 0", code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, exitOK, "Usage: fencestream"},
		{[]string{"--nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"extra"}, exitUsage, "unexpected arguments"},
		{[]string{"--partitions", "0"}, exitUsage, "--partitions"},
		{[]string{"--rate", "0"}, exitUsage, "--rate"},
		{[]string{"--devices", "0", "--parked", "0"}, exitUsage, "--no-sim"},
		{[]string{"--log-level", "loud"}, exitUsage, "--log-level"},
		{[]string{"--tiles", "ftp://tiles/{z}/{x}/{y}"}, exitUsage, "--tiles"},
		{[]string{"--help"}, exitOK, "-tiles"},
		{[]string{"--brokers", "x:1", "--sasl-mechanism", "KERBEROS"}, exitUsage, "unknown SASL mechanism"},
		// A module's flag is reported even when the binary's own flags are wrong too.
		{[]string{"--data", "", "--min-samples", "0"}, exitUsage, "MinSamples is 0"},
		{[]string{"--data", "", "--min-samples", "0"}, exitUsage, "--data must not be empty"},
	} {
		var out, errs bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errs)
		if code != tc.code {
			t.Errorf("%q: exit code %d, want %d (%s)", tc.args, code, tc.code, errs.String())
		}
		if !strings.Contains(out.String()+errs.String(), tc.want) {
			t.Errorf("%q: output lacks %q: %s", tc.args, tc.want, errs.String())
		}
	}
}

func TestUnreachableBrokers(t *testing.T) {
	// The broker check gives up after 30 s on its own; a shorter deadline
	// keeps the test quick and takes the same path.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"--brokers", "127.0.0.1:1", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, &out, &errs)
	if code != exitFailure {
		t.Fatalf("exit code %d, want %d: %s", code, exitFailure, errs.String())
	}
	if !strings.Contains(errs.String(), "127.0.0.1:1 unreachable") {
		t.Errorf("no clear error: %s", errs.String())
	}
}

func TestExternalBroker(t *testing.T) {
	b := embeddedtest.Start(t)
	addr := strings.Join(b.Addrs(), ",")
	data := t.TempDir()
	p := start(t, "--brokers", addr, "--data", data, "--listen", "127.0.0.1:0", "--no-sim", "--partitions", "6", "--tiles", "none")
	url := p.waitOutput(t, reURL, startDeadline)[1]
	p.waitOutput(t, regexp.MustCompile(`Kafka\s+`+regexp.QuoteMeta(addr)+` \(external\)`), startDeadline)
	waitServing(t, p, url)
	if code, body, err := get(url + "v1/config"); err != nil || code != 200 || !strings.Contains(string(body), `"tiles":""`) {
		t.Errorf("--tiles none did not reach the page: %d %s %v", code, body, err)
	}
	if code := p.interrupt(t); code != 0 {
		t.Fatalf("SIGINT: exit code %d, want 0", code)
	}
	if _, err := os.Stat(filepath.Join(data, "broker")); !os.IsNotExist(err) {
		t.Errorf("an embedded broker wrote %s/broker although --brokers was given (%v)", data, err)
	}
	// The topology was created with the requested partitions, and a second
	// start with another count is refused, naming the topic and both counts.
	p = start(t, "--brokers", addr, "--data", data, "--listen", "127.0.0.1:0", "--no-sim")
	if code := p.wait(t); code != exitMismatch {
		t.Fatalf("partition mismatch: exit code %d, want %d", code, exitMismatch)
	}
	if out := p.out.String(); !strings.Contains(out, `topic "pings" has 6 partitions on the broker but the topology declares 24`) {
		t.Errorf("mismatch not explained:\n%s", tail(out, 20))
	}
}

func TestCheckStateCluster(t *testing.T) {
	state := t.TempDir()
	if err := checkStateCluster(filepath.Join(state, "none"), "c1"); err != nil {
		t.Fatalf("missing state directory: %v", err)
	}
	dir := filepath.Join(state, "debouncer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fencestream-state.json"), []byte(`{"cluster_id":"c1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkStateCluster(state, "c1"); err != nil {
		t.Fatalf("same cluster: %v", err)
	}
	err := checkStateCluster(state, "c2")
	if !errors.Is(err, group.ErrStateMismatch) || !strings.Contains(err.Error(), `cluster "c1" but the broker is cluster "c2"`) {
		t.Fatalf("other cluster: %v", err)
	}
	if err := checkFreshBroker(filepath.Join(state, "broker"), state); !errors.Is(err, errBrokerDataGone) {
		t.Fatalf("empty broker directory next to state: %v", err)
	}
	if err := checkFreshBroker(filepath.Join(state, "broker"), filepath.Join(state, "none")); err != nil {
		t.Fatalf("fresh broker and no state: %v", err)
	}
}

// TestSecondRunOnOneDataDirIsRefused: a second all-in-one on the --data of a
// running one (with --reset-state, which would delete the live state) is
// refused at once, naming the directory and the first one's pid, and deletes
// or writes nothing (on main its embedded broker first wrote into the live
// directory).
func TestSecondRunOnOneDataDirIsRefused(t *testing.T) {
	data := t.TempDir()
	p := start(t, "--data", data, "--listen", "127.0.0.1:0", "--broker-port", "0", "--no-sim", "--partitions", "2", "--tiles", "none")
	p.waitOutput(t, reURL, startDeadline)
	// The banner comes before the processors claim their state directories:
	// wait for them, so the check below has something to lose.
	var stateBefore []os.DirEntry
	for deadline := time.Now().Add(startDeadline); len(stateBefore) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first run made no state directory")
		}
		stateBefore, _ = os.ReadDir(filepath.Join(data, "state"))
	}
	second := start(t, "--data", data, "--listen", "127.0.0.1:0", "--broker-port", "0", "--no-sim", "--partitions", "2", "--tiles", "none", "--reset-state")
	if code := second.wait(t); code == 0 {
		t.Fatal("a second all-in-one on a live --data exited 0")
	}
	out := second.out.String()
	if !strings.Contains(out, data) || !strings.Contains(out, fmt.Sprintf("pid %d", p.cmd.Process.Pid)) {
		t.Errorf("refusal does not name %s and pid %d:\n%s", data, p.cmd.Process.Pid, tail(out, 10))
	}
	// The first run may still be creating directories of its own (views,
	// late groups); what the refused run must not have done is delete any
	// (--reset-state) or touch the ones there.
	stateAfter, _ := os.ReadDir(filepath.Join(data, "state"))
	after := map[string]bool{}
	for _, e := range stateAfter {
		after[e.Name()] = true
	}
	for _, e := range stateBefore {
		if !after[e.Name()] {
			t.Errorf("state/%s was deleted by the refused run", e.Name())
		}
	}
	if code := p.interrupt(t); code != 0 {
		t.Fatalf("first run, SIGINT: exit code %d", code)
	}
}
