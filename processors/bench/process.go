package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// ProcessConfig sizes OccupancyProcess: occupancy as a process of its own
// (the cmd/occupancy binary) against a broker in another process, as it runs
// in production, where stage (e) of Run shares one process with its broker
// and the bench.
type ProcessConfig struct {
	// Cluster is the broker (fencectl broker, or a real cluster): required.
	// The geofencing topics and groups on it are deleted and recreated.
	Cluster cluster.Config
	// Exec is the occupancy binary (go build -o /tmp/occupancy ./cmd/occupancy).
	Exec string
	// Args go to the binary after the ones the bench gives (--storage
	// memory, say).
	Args []string
	// Triggers are produced to fence-triggers before the binary starts
	// (default 100,000), for TriggerDevices devices (default 20,000) over the
	// demo catalogue's first 7 fences: the triggers of stage (e).
	Triggers       int
	TriggerDevices int
	// RecordCache, when positive, is given to the binary as --record-cache
	// (the binary must have that flag).
	RecordCache int
	// Partitions of the keyed topics, given to the binary as --partitions
	// (default topology.DefaultPartitions).
	Partitions int32
	// ReadyTimeout bounds the binary's start until its /readyz answers 200
	// (default 2 min); StallTimeout fails the run when it applies nothing
	// for that long (default 60 s). Neither lets the bench hang on a binary
	// that never consumes.
	ReadyTimeout time.Duration
	StallTimeout time.Duration
	// BrokerPID, when set, is the broker's process on this machine: its CPU
	// in the timed window is reported too.
	BrokerPID int
	// Progress receives one line per step and the binary's stderr when it
	// fails (default: discarded).
	Progress io.Writer
}

// ProcessResult is what OccupancyProcess measured. The timed window runs
// from the first /readyz that answers 200 to the first scrape of /metrics
// that shows every trigger applied and every count change it caused added
// up; triggers the binary applied before it answered ready are not in it.
type ProcessResult struct {
	Machine struct {
		CPUs      int    `json:"cpus"`
		GOOS      string `json:"goos"`
		GOARCH    string `json:"goarch"`
		GoVersion string `json:"go"`
	} `json:"machine"`
	Config struct {
		Triggers       int      `json:"triggers"`
		TriggerDevices int      `json:"trigger_devices"`
		Fences         int      `json:"fences"`
		Partitions     int32    `json:"partitions"`
		RecordCache    int      `json:"record_cache_bytes,omitempty"`
		Broker         string   `json:"broker"`
		Exec           string   `json:"exec"`
		Args           []string `json:"args"`
	} `json:"config"`
	// ProduceSeconds is the demo fences' and the triggers' produce.
	ProduceSeconds float64 `json:"produce_s"`
	// StartupSeconds is from starting the binary to its /readyz's first 200.
	StartupSeconds float64 `json:"startup_s"`
	// AppliedBeforeReady is how many triggers it had applied by then.
	AppliedBeforeReady int `json:"applied_before_ready"`
	// Timed are the triggers in the window (Triggers - AppliedBeforeReady).
	Timed          int     `json:"triggers_timed"`
	Seconds        float64 `json:"seconds"`
	TriggersPerSec float64 `json:"triggers_per_s"`
	// CPUMicrosPerTrigger is the binary's CPU time (user+system, from
	// /proc/PID/stat) in the window per timed trigger; CPUCores the same
	// time over the window's wall time.
	CPUMicrosPerTrigger float64 `json:"cpu_us_per_trigger"`
	CPUCores            float64 `json:"cpu_cores"`
	// BrokerCPUMicrosPerTrigger is the broker process's CPU in the window
	// per timed trigger (with ProcessConfig.BrokerPID).
	BrokerCPUMicrosPerTrigger float64 `json:"broker_cpu_us_per_trigger,omitempty"`
	// Scrapes of the binary's /metrics in the window (their CPU is in its
	// figure).
	Scrapes int `json:"metrics_scrapes"`
	// Results are the binary's fencestream_occupancy_triggers_total and
	// (as "changes/"+result) fencestream_occupancy_changes_total at the end.
	Results map[string]float64 `json:"results"`
	// ChildCPUSeconds and ChildMaxRSSMB are the binary's rusage over its
	// whole life (start, the run, the stop).
	ChildCPUSeconds float64 `json:"child_cpu_total_s"`
	ChildMaxRSSMB   float64 `json:"child_max_rss_mb"`
	TotalSeconds    float64 `json:"total_s"`
}

func (c *ProcessConfig) defaults() error {
	if c.Triggers == 0 {
		c.Triggers = 100_000
	}
	if c.TriggerDevices == 0 {
		c.TriggerDevices = 20_000
	}
	if c.Partitions == 0 {
		c.Partitions = topology.DefaultPartitions
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 2 * time.Minute
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = time.Minute
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	switch {
	case len(c.Cluster.Brokers) == 0:
		return errors.New("no broker: the occupancy process runs against a broker of its own (start one with `fencectl broker --data DIR`)")
	case c.Exec == "":
		return errors.New("no occupancy binary (go build -o /tmp/occupancy ./cmd/occupancy)")
	case c.Triggers < 0 || c.TriggerDevices < 0 || c.RecordCache < 0:
		return errors.New("triggers, trigger devices and record cache must not be negative (0: the default)")
	case c.BrokerPID < 0:
		return fmt.Errorf("broker pid %d", c.BrokerPID)
	case c.ReadyTimeout < 0 || c.StallTimeout < 0:
		return errors.New("ready and stall timeouts must not be negative")
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "metrics-addr" || name == "state-dir" || name == "brokers") {
			return fmt.Errorf("the binary's %s is the bench's to set, not an argument after --", a)
		}
	}
	return nil
}

// OccupancyProcess measures the occupancy binary cfg.Exec as a process of
// its own: it deletes and recreates the geofencing topics and groups on
// cfg.Cluster, loads the demo fences, produces cfg.Triggers triggers, starts
// the binary on a temporary state directory, times it from ready until it
// has applied every trigger (exactly once each, with every count change
// added up: else an error), then stops it with SIGTERM, checks its groups
// committed every offset, and removes the directory.
func OccupancyProcess(ctx context.Context, cfg ProcessConfig) (*ProcessResult, error) {
	start := time.Now()
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	exe, err := exec.LookPath(cfg.Exec)
	if err != nil {
		return nil, fmt.Errorf("occupancy binary: %w", err)
	}
	if cfg.RecordCache > 0 {
		if err := hasFlag(ctx, exe, "record-cache"); err != nil {
			return nil, err
		}
	}
	e := &env{cfg: Config{Cluster: cfg.Cluster, Partitions: cfg.Partitions, Progress: cfg.Progress,
		Triggers: cfg.Triggers, TriggerDevices: cfg.TriggerDevices}, log: quietLog}
	cleanup, err := e.connect()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &ProcessResult{}
	res.Machine.CPUs, res.Machine.GOOS, res.Machine.GOARCH, res.Machine.GoVersion = runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()
	res.Config.Triggers, res.Config.TriggerDevices, res.Config.Partitions = cfg.Triggers, cfg.TriggerDevices, cfg.Partitions
	res.Config.RecordCache, res.Config.Broker, res.Config.Exec = cfg.RecordCache, strings.Join(cfg.Cluster.Brokers, ","), exe
	res.Config.Fences = min(e.cat.Snapshot().Len(), occupancyFences)

	e.progress("recreating the geofencing topics on %s", res.Config.Broker)
	if err := e.reset(ctx); err != nil {
		return nil, err
	}
	produced := time.Now()
	if err := e.produceDemoFences(ctx); err != nil {
		return nil, err
	}
	recs, err := e.triggers()
	if err != nil {
		return nil, err
	}
	e.progress("producing %d triggers for %d devices", len(recs), cfg.TriggerDevices)
	if err := e.kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, err
	}
	res.ProduceSeconds = time.Since(produced).Seconds()

	stateDir, err := os.MkdirTemp("", "fencestream-bench-occupancy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stateDir)
	args := []string{"--brokers", res.Config.Broker, "--state-dir", stateDir, "--partitions", strconv.Itoa(int(cfg.Partitions))}
	args = append(args, clusterArgs(cfg.Cluster)...)
	if cfg.RecordCache > 0 {
		args = append(args, "--record-cache", strconv.Itoa(cfg.RecordCache))
	}
	ch, err := startChild(exe, args, cfg.Args)
	if err != nil {
		return nil, err
	}
	res.Config.Args = ch.args
	defer ch.stop()
	e.progress("started %s %s", exe, strings.Join(ch.args, " "))
	if err := ch.measure(ctx, cfg, res); err != nil {
		ch.stop()
		return nil, ch.explain(err)
	}
	e.progress("occupancy process: %.0f triggers/s, %.1f µs CPU per trigger (%.2f cores)", res.TriggersPerSec, res.CPUMicrosPerTrigger, res.CPUCores)
	if err := ch.stop(); err != nil {
		return nil, ch.explain(err)
	}
	if ru, ok := ch.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.ChildCPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		res.ChildMaxRSSMB = float64(ru.Maxrss) / 1024 // kilobytes on Linux
	}
	if err := e.committedToEnd(ctx); err != nil {
		return nil, err
	}
	res.TotalSeconds = time.Since(start).Seconds()
	return res, nil
}

// produceDemoFences publishes the demo fences to the fences topic, as
// `fencectl fences load --demo` does: the binary follows that topic and
// waits for it before it consumes.
func (e *env) produceDemoFences(ctx context.Context) error {
	parsed, err := fences.ParseFeatureCollection(fences.DemoGeoJSON())
	if err != nil {
		return err
	}
	codec := codecs.For[geofencepb.Fence]()
	recs := make([]*kgo.Record, len(parsed))
	for i, f := range parsed {
		v, err := codec.Marshal(f)
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: geofence.TopicFences, Key: []byte(f.GetFenceId()), Value: v}
	}
	if err := e.newProducer(); err != nil {
		return err
	}
	e.progress("loading the %d demo fences", len(recs))
	return e.kc.ProduceSync(ctx, recs...).FirstErr()
}

// committedToEnd checks that occupancy's two groups committed every record
// of their inputs: the stop was clean and no other group did the work.
func (e *env) committedToEnd(ctx context.Context) error {
	for group, topic := range map[string]string{geofence.GroupOccupancyMembers: geofence.TopicTriggers, geofence.GroupOccupancy: geofence.TopicOccupancyChanges} {
		ends, err := e.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return err
		}
		committed, err := e.adm.FetchOffsets(ctx, group)
		if err != nil {
			return fmt.Errorf("committed offsets of %s: %w", group, err)
		}
		var want, got int64
		ends.Each(func(o kadm.ListedOffset) {
			want += o.Offset
			if c, ok := committed.Lookup(topic, o.Partition); ok && c.Err == nil {
				got += min(c.At, o.Offset)
			}
		})
		if got != want {
			return fmt.Errorf("after its stop, group %s committed %d of the %d records on %s", group, got, want, topic)
		}
	}
	return nil
}

// clusterArgs are the flags that reach cfg's cluster, but the brokers: the
// password goes through the environment (FENCESTREAM_SASL_PASSWORD, which
// the binary inherits), not the command line.
func clusterArgs(cfg cluster.Config) []string {
	var args []string
	if cfg.TLS {
		args = append(args, "--tls")
	}
	for flag, v := range map[string]string{"--tls-ca": cfg.TLSCAFile, "--tls-cert": cfg.TLSCertFile, "--tls-key": cfg.TLSKeyFile,
		"--sasl-mechanism": cfg.SASLMechanism, "--sasl-user": cfg.SASLUser} {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	if cfg.TLSInsecureSkipVerify {
		args = append(args, "--tls-insecure")
	}
	return args
}

// hasFlag checks that the binary's --help lists --name.
func hasFlag(ctx context.Context, exe, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, exe, "--help").CombinedOutput()
	if !bytes.Contains(out, []byte("-"+name+" ")) && !bytes.Contains(out, []byte("-"+name+"\n")) {
		return fmt.Errorf("%s --help lists no --%s flag: this occupancy binary cannot take it", exe, name)
	}
	return nil
}

// child is the occupancy binary running.
type child struct {
	cmd     *exec.Cmd
	args    []string
	metrics string // host:port of its /metrics and /readyz
	stderr  *tail
	exited  chan struct{}
	stopped bool
	stopErr error
	started time.Time
	http    *http.Client
}

// startChild starts exe with args, --metrics-addr on a free loopback port
// and extra (the user's), in a process group of its own (a wrapper script's children stop
// with it) that ends if the bench dies.
func startChild(exe string, args, extra []string) (*child, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close() // the binary binds it; a port taken meanwhile fails its start, reported with its stderr
	args = append(append(args, "--metrics-addr", addr), extra...)
	ch := &child{args: args, metrics: addr, stderr: &tail{max: 16 << 10}, exited: make(chan struct{}),
		http: &http.Client{Timeout: 5 * time.Second}}
	ch.cmd = exec.Command(exe, ch.args...)
	ch.cmd.Stdout, ch.cmd.Stderr = ch.stderr, ch.stderr
	ch.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	ch.cmd.WaitDelay = 5 * time.Second // a grandchild holding the pipes does not hold Wait
	if err := ch.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", exe, err)
	}
	ch.started = time.Now()
	go func() { _ = ch.cmd.Wait(); close(ch.exited) }()
	return ch, nil
}

// stop sends SIGTERM to the child's process group, waits for it (SIGKILL
// after host.ExitWait and 5 s more) and returns an error if it did not exit
// cleanly. Only the first call stops; later ones return its result.
func (ch *child) stop() error {
	if ch.stopped {
		return ch.stopErr
	}
	ch.stopped = true
	select {
	case <-ch.exited:
		ch.stopErr = fmt.Errorf("occupancy exited before it was stopped: %v", ch.cmd.ProcessState)
		return ch.stopErr
	default:
	}
	_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-ch.exited:
	case <-time.After(host.ExitWait + 5*time.Second):
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
		<-ch.exited
		ch.stopErr = fmt.Errorf("occupancy still running %v after SIGTERM: killed", host.ExitWait+5*time.Second)
		return ch.stopErr
	}
	if !ch.cmd.ProcessState.Success() {
		ch.stopErr = fmt.Errorf("occupancy stopped by SIGTERM: %v", ch.cmd.ProcessState)
	}
	return ch.stopErr
}

// explain adds the end of the child's output to err.
func (ch *child) explain(err error) error {
	if s := strings.TrimSpace(ch.stderr.String()); s != "" {
		return fmt.Errorf("%w\nits output ends:\n%s", err, s)
	}
	return err
}

// measure waits for the child's readiness, then times it until every
// trigger is applied, filling res.
func (ch *child) measure(ctx context.Context, cfg ProcessConfig, res *ProcessResult) error {
	n := cfg.Triggers
	// Ready: /readyz answers 200 once both groups recovered their tables
	// and the catalogue is loaded.
	deadline := ch.started.Add(cfg.ReadyTimeout)
	for !ch.ready(ctx) {
		if err := ch.wait(ctx, readyPoll, deadline, "occupancy not ready (its /readyz answers no 200) %v after its start", cfg.ReadyTimeout); err != nil {
			return err
		}
	}
	t0, cpu0, broker0 := time.Now(), procCPU(ch.cmd.Process.Pid), procCPU(cfg.BrokerPID)
	res.StartupSeconds = t0.Sub(ch.started).Seconds()
	results, err := ch.scrape(ctx)
	if err != nil {
		return err
	}
	res.Scrapes = 1
	applied0 := int(results["applied"])
	res.AppliedBeforeReady = applied0
	last, lastAt, p0, next := -1.0, time.Now(), -1.0, minScrape
	for {
		var trig, changes float64
		for k, v := range results {
			if strings.HasPrefix(k, "changes/") {
				changes += v
			} else {
				trig += v
			}
		}
		if trig >= float64(n) && changes >= results["applied"] {
			el := time.Since(t0)
			cpu, broker := procCPU(ch.cmd.Process.Pid)-cpu0, procCPU(cfg.BrokerPID)-broker0
			res.Results = results
			// Right as well as fast: every trigger is a real transition,
			// applied once, and makes one count change.
			if results["applied"] != float64(n) || results["changes/applied"] != float64(n) || trig != float64(n) {
				return fmt.Errorf("occupancy took %.0f triggers, applied %.0f and added up %.0f changes; want %d of each (results %v)", trig, results["applied"], results["changes/applied"], n, results)
			}
			res.Timed, res.Seconds = n-applied0, el.Seconds()
			if res.Timed > 0 && el > 0 {
				res.TriggersPerSec = float64(res.Timed) / el.Seconds()
				res.CPUMicrosPerTrigger = float64(cpu/time.Microsecond) / float64(res.Timed)
				res.CPUCores = cpu.Seconds() / el.Seconds()
				if cfg.BrokerPID > 0 {
					res.BrokerCPUMicrosPerTrigger = float64(broker/time.Microsecond) / float64(res.Timed)
				}
			}
			return nil
		}
		p := trig + changes
		if p0 < 0 {
			p0 = p
		}
		// A scrape of /metrics costs the binary milliseconds of CPU: read
		// it often only near the end, where the timing's resolution is,
		// and back off while nothing moves.
		if p != last {
			last, lastAt = p, time.Now()
			next = maxScrape
			if r := (p - p0) / time.Since(t0).Seconds(); r > 0 {
				left := time.Duration((float64(2*n) - p) / r * float64(time.Second))
				next = min(maxScrape, max(minScrape, left/2))
			}
		} else {
			next = min(maxScrape, 2*next)
		}
		if err := ch.wait(ctx, next, lastAt.Add(cfg.StallTimeout), "occupancy applied %.0f of %d triggers and %.0f changes, then nothing for %v (results %v)", results["applied"], n, results["changes/applied"], cfg.StallTimeout, results); err != nil {
			return err
		}
		if results, err = ch.scrape(ctx); err != nil {
			return err
		}
		res.Scrapes++
	}
}

// How often the child's /readyz is read (it costs next to nothing), and
// the bounds of the /metrics scrapes' interval: each costs the child 1-3 ms
// of CPU (a 25 KB exposition), counted in its figure.
const (
	readyPoll = 20 * time.Millisecond
	minScrape = 10 * time.Millisecond
	maxScrape = 500 * time.Millisecond
)

// wait sleeps for d; it fails when the child exited, ctx ended
// or deadline passed (with the message format, args).
func (ch *child) wait(ctx context.Context, d time.Duration, deadline time.Time, format string, args ...any) error {
	if time.Now().After(deadline) {
		return fmt.Errorf(format, args...)
	}
	select {
	case <-ch.exited:
		return fmt.Errorf("occupancy exited: %v", ch.cmd.ProcessState)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (ch *child) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ch.metrics+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := ch.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func (ch *child) ready(ctx context.Context) bool {
	code, _, err := ch.get(ctx, "/readyz")
	return err == nil && code == http.StatusOK
}

// scrape reads the child's occupancy counters from its /metrics: results by
// trigger result, and "changes/"+result.
func (ch *child) scrape(ctx context.Context) (map[string]float64, error) {
	code, body, err := ch.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading occupancy's /metrics: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("occupancy's /metrics answered %d", code)
	}
	out, found := parseOccupancyResults(body)
	if !found {
		return nil, fmt.Errorf("occupancy's /metrics has no fencestream_occupancy_triggers_total: is %s cmd/occupancy?", ch.cmd.Path)
	}
	return out, nil
}

// parseOccupancyResults reads fencestream_occupancy_triggers_total and
// fencestream_occupancy_changes_total by result from Prometheus' text
// format; found is whether the first is there.
func parseOccupancyResults(body []byte) (out map[string]float64, found bool) {
	out = map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		prefix := ""
		switch {
		case strings.HasPrefix(line, "fencestream_occupancy_triggers_total{"):
			found = true
		case strings.HasPrefix(line, "fencestream_occupancy_changes_total{"):
			prefix = "changes/"
		default:
			continue
		}
		end := strings.LastIndexByte(line, '}')
		_, result, ok := strings.Cut(line[:end], `result="`)
		if !ok {
			continue
		}
		result, _, _ = strings.Cut(result, `"`)
		fields := strings.Fields(line[end+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			out[prefix+result] += v
		}
	}
	return out, found
}

// procCPU is a live process's user+system CPU time from /proc/PID/stat
// (clock ticks of 10 ms, Linux's USER_HZ); 0 when it cannot be read or pid
// is 0.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing one (utime and stime are fields 14 and 15).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
