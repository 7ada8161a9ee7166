//go:build unix

package delivery_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// TestDeliveryProcess is the delivery binary (as cmd/delivery builds it)
// when TestEndToEndKill9 runs it as a child process.
func TestDeliveryProcess(t *testing.T) {
	if os.Getenv("DELIVERY_MAIN_PROCESS") != "1" {
		t.Skip("helper process")
	}
	os.Args = append([]string{"delivery"}, strings.Fields(os.Getenv("DELIVERY_ARGS"))...)
	host.Main(modules.Binary("delivery", "delivery (test child)", "", delivery.Module()))
}

// child is one run of the delivery process.
type child struct {
	cmd   *exec.Cmd
	ready chan struct{}
	done  chan struct{}
	log   *embeddedtest.SyncBuffer
}

func startChild(t *testing.T, args string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestDeliveryProcess$"), ready: make(chan struct{}), done: make(chan struct{}),
		log: &embeddedtest.SyncBuffer{}}
	c.cmd.Env = append(os.Environ(), "DELIVERY_MAIN_PROCESS=1", "DELIVERY_ARGS="+args)
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(c.log, sc.Text())
			if strings.Contains(sc.Text(), "delivery ready") {
				once.Do(func() { close(c.ready) })
			}
		}
		c.cmd.Wait() //nolint:errcheck // killed or stopped by the test
	}()
	t.Cleanup(func() { c.kill9(t) })
	select {
	case <-c.ready:
	case <-c.done:
		t.Fatalf("delivery process ended before ready:\n%s", c.log)
	case <-time.After(90 * time.Second):
		t.Fatalf("delivery process not ready within 90 s:\n%s", c.log)
	}
	return c
}

// kill9 ends the process with SIGKILL: nothing is flushed or committed.
func (c *child) kill9(t *testing.T) {
	c.cmd.Process.Kill() //nolint:errcheck // no-op once it has ended
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("delivery process did not end within 30 s of SIGKILL")
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool, dump func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s\n%s", what, timeout, dump())
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by the deadline
	}
}

// The delivery binary against the embedded broker and real receivers on
// 127.0.0.1: one healthy, one answering 200 after a delay (slow), one
// answering 500 until after a kill -9 and a restart, one that never
// answers in time (dead), one answering 410, and a disabled subscription. The process is killed while retries are pending
// (its input offsets committed, so only its state and timers hold them).
// Every trigger reaches the healthy and the recovered receiver at least
// once, in device order, signed; the status counts each exactly once; the
// disabled subscription gets nothing, the 410 one is disabled after its
// first answers; the slow one gets every trigger in device order; and the
// dead and the slow endpoint do not delay the healthy one.
func TestEndToEndKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("process and broker test")
	}
	const partitions, devices, perDevice = 6, 20, 10
	b := embeddedtest.Start(t)
	cl := cluster.Config{Brokers: b.Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topo, err := host.Compose(modules.Base(partitions), delivery.Module())
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(embeddedtest.Client(t, cl))
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}

	var flakyRecovered atomic.Bool
	healthy := newReceiver(t, "s3cret-healthy", nil)
	flaky := newReceiver(t, "s3cret-flaky", func(_ int, w http.ResponseWriter) bool {
		if !flakyRecovered.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return false
		}
		return true
	})
	stop := make(chan struct{})
	// slow answers 200, but only after slowDelay: far longer than the
	// healthy one's instant answer, within the attempt timeout (issue 30's
	// "slow at 10 s" scaled to this test's 5 s attempt timeout).
	const slowDelay = 3 * time.Second
	slow := newReceiver(t, "s3cret-slow", func(_ int, w http.ResponseWriter) bool {
		select {
		case <-stop:
		case <-time.After(slowDelay):
		}
		return true
	})
	dead := newReceiver(t, "s3cret-dead", func(_ int, w http.ResponseWriter) bool {
		select { // never answers within the attempt timeout
		case <-stop:
		case <-time.After(10 * time.Second):
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return false
	})
	defer close(stop) // before the servers close (Cleanup runs later)
	gone := newReceiver(t, "s3cret-gone", func(_ int, w http.ResponseWriter) bool { w.WriteHeader(http.StatusGone); return false })
	off := newReceiver(t, "s3cret-off", nil)
	for _, r := range []*receiver{healthy, flaky, slow} {
		r.tolerance = 5 * time.Minute
	}

	prod := embeddedtest.Client(t, cl)
	subCodec := codecs.For[deliverypb.Subscription]()
	for _, s := range []*deliverypb.Subscription{sub("healthy", healthy.url()), sub("flaky", flaky.url()), sub("slow", slow.url()),
		sub("dead", dead.url()), sub("gone", gone.url()), {Id: "off", Url: off.url(), Secret: "s3cret-off", Enabled: false}} {
		v, err := subCodec.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: delivery.TopicSubscriptions, Key: []byte(s.Id), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	trCodec := codecs.For[geofencepb.Trigger]()
	sent := map[string]time.Time{}
	var want []string
	produce := func(from, to, devices int) {
		t.Helper()
		var recs []*kgo.Record
		for n := from; n <= to; n++ {
			for d := range devices {
				tr := trigger(fmt.Sprintf("dev-%02d", d), "f-1", n)
				v, err := trCodec.Marshal(tr)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, &kgo.Record{Topic: geofence.TopicTriggers, Key: []byte(tr.DeviceId), Value: v})
				want = append(want, tr.TriggerId)
			}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for _, id := range want[len(want)-len(recs):] {
			sent[id] = now
		}
	}

	state := t.TempDir()
	args := fmt.Sprintf("--brokers %s --state-dir %s --partitions %d --metrics-addr 127.0.0.1:0 --timer-interval 100ms"+
		" --delivery-attempt-timeout 5s --delivery-attempt-wait 25ms --delivery-backoff 200ms --delivery-backoff-max 1s --delivery-max-attempts 1000"+
		" --delivery-breaker-failures 2 --delivery-breaker-cooldown 2s%s", b.Addrs()[0], state, partitions, os.Getenv("DELIVERY_E2E_EXTRA"))
	a := startChild(t, args)
	dump := func() string {
		return fmt.Sprintf("healthy %d/%d, flaky calls %d accepted %d, slow %d, dead calls %d, gone calls %d\nprocess log tail:\n%s",
			len(healthy.ids()), len(want), flaky.callCount(), len(flaky.ids()), len(slow.ids()), dead.callCount(), gone.callCount(),
			tail(a.log.String(), 40))
	}
	produce(1, perDevice/2, devices)
	phase1 := slices.Clone(want)
	waitFor(t, "healthy has every trigger produced before the kill", time.Minute, func() bool { return hasAll(healthy.ids(), phase1) }, dump)
	// Pending retries: the flaky endpoint has been retried (its breaker
	// lets a probe through per cooldown), and every input offset is
	// committed, so a restart reads none of them again: only the state and
	// its timers hold them.
	waitFor(t, "flaky retried and every input committed", time.Minute, func() bool {
		return flaky.callCount() >= 4 && committed(ctx, adm, delivery.Group, geofence.TopicTriggers)
	}, func() string {
		return fmt.Sprintf("committed: %v\n%s", committed(ctx, adm, delivery.Group, geofence.TopicTriggers), dump())
	})
	if n := len(flaky.ids()); n != 0 {
		t.Fatalf("flaky accepted %d before recovering", n)
	}
	a.kill9(t)
	// Half the devices send nothing more: their pending deliveries move
	// only by the retry timers restored from the state.
	produce(perDevice/2+1, perDevice, devices/2)
	a = startChild(t, args)
	time.AfterFunc(2*time.Second, func() { flakyRecovered.Store(true) })
	waitFor(t, "every trigger at the healthy, the slow and the recovered receiver", 2*time.Minute, func() bool {
		return hasAll(healthy.ids(), want) && hasAll(flaky.ids(), want) && hasAll(slow.ids(), want)
	}, dump)

	// /metrics of the running process: per-subscription attempts and the
	// dead endpoint's open breaker.
	var metricsURL string
	for _, l := range strings.Split(a.log.String(), "\n") {
		if i := strings.Index(l, "url=http://"); i >= 0 && strings.Contains(l, "metrics listening") {
			metricsURL = strings.Fields(l[i+len("url="):])[0]
		}
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("metrics at %q: %v", metricsURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range []string{`fencestream_delivery_attempts_total{result="delivered",subscription="flaky"}`,
		`fencestream_delivery_breaker_open{endpoint="` + strings.TrimSuffix(dead.url(), "/hook") + `"} 1`,
		`fencestream_delivery_deferred_total{reason="breaker-open"}`} {
		if !strings.Contains(string(body), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}

	for name, r := range map[string]*receiver{"healthy": healthy, "flaky": flaky, "slow": slow} {
		if p := r.problems(); len(p) > 0 {
			t.Errorf("%s: %d requests with a bad signature or header, first: %s", name, len(p), p[0])
		}
		if err := inDeviceOrder(r.ids()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := off.callCount(); n != 0 {
		t.Errorf("the disabled subscription's endpoint was called %d times", n)
	}
	// Disabled when its first answer is applied; until then each device
	// may have its head in flight (an answer not back within the attempt
	// wait is applied by the timer), so at most one call per device.
	if n := gone.callCount(); n < 1 || n > devices {
		t.Errorf("the 410 endpoint was called %d times, want 1..%d (disabled at its first answer applied, in-flight ones aside)", n, devices)
	}
	// The dead and the slow endpoint delay no other: every trigger
	// produced while the first process ran reached the healthy receiver
	// soon after it was sent. Attempts outlive the handler call (the
	// timer applies a slow answer), so no partition waits for the slow
	// answers; before that, a handler call waited for every
	// subscription's attempt, and each trigger of a partition cost the
	// slow answer to every subscriber there (with a 2 s answer: p99 57 s).
	var lat []time.Duration
	healthy.mu.Lock()
	seen := map[string]bool{}
	for i, p := range healthy.got {
		if at, ok := sent[p.TriggerID]; ok && slices.Contains(phase1, p.TriggerID) && !seen[p.TriggerID] {
			seen[p.TriggerID] = true
			lat = append(lat, healthy.arrived[i].Sub(at))
		}
	}
	healthy.mu.Unlock()
	slices.Sort(lat)
	p99 := lat[(len(lat)*99+99)/100-1]
	t.Logf("healthy: first-phase delivery after its produce p50 %s, p99 %s, worst %s (slow answers after %s); dead endpoint called %d times",
		lat[len(lat)/2], p99, lat[len(lat)-1], slowDelay, dead.callCount())
	// The bound is one slow answer: the old code's p99 was many of them;
	// measured now 0.4-0.9 s on a loaded 2-core machine.
	if bound := slowDelay; p99 > bound {
		t.Errorf("healthy deliveries waited up to %s (p99) behind the dead and the slow endpoint (want < %s)", p99, bound)
	}

	// The status counts each trigger exactly once, whatever was re-sent.
	tv, err := view.New[deliverypb.SubscriptionStatus](cl, delivery.StatusTable, view.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, tv)
	statusOf := func(id string) *deliverypb.SubscriptionStatus {
		st, err := tv.Get(id)
		if err != nil {
			return nil
		}
		return st
	}
	total := int64(len(want))
	waitFor(t, "status: healthy, slow and flaky delivered every trigger once, none pending", time.Minute, func() bool {
		h, f, s := statusOf("healthy"), statusOf("flaky"), statusOf("slow")
		return h.GetDelivered() == total && h.GetPending() == 0 && f.GetDelivered() == total && f.GetPending() == 0 && f.GetFailedAttempts() > 0 &&
			s.GetDelivered() == total && s.GetPending() == 0
	}, func() string {
		return fmt.Sprintf("healthy %v\nflaky %v\nslow %v", statusOf("healthy"), statusOf("flaky"), statusOf("slow"))
	})
	if st := statusOf("off"); st != nil {
		t.Errorf("the disabled subscription has a status: %v", st)
	}
	t.Logf("flaky status %v; slow status %v; dead status %v; gone status %v", statusOf("flaky"), statusOf("slow"), statusOf("dead"), statusOf("gone"))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func hasAll(got, want []string) bool {
	seen := make(map[string]bool, len(got))
	for _, id := range got {
		seen[id] = true
	}
	for _, id := range want {
		if !seen[id] {
			return false
		}
	}
	return true
}

// inDeviceOrder checks that each device's triggers first arrived in the
// order of their numbers (repeats after a crash are at-least-once).
func inDeviceOrder(ids []string) error {
	last := map[string]int{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		parts := strings.Split(id, "|")
		var n int
		fmt.Sscan(parts[3], &n)
		if n != last[parts[0]]+1 {
			return fmt.Errorf("device %s: trigger %d arrived first after %d", parts[0], n, last[parts[0]])
		}
		last[parts[0]] = n
	}
	return nil
}

// committed reports whether group has committed topic's end offsets.
func committed(ctx context.Context, adm *kadm.Client, grp, topic string) bool {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	offs, err := adm.FetchOffsets(ctx, grp)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		c, found := offs.Lookup(topic, o.Partition)
		if o.Offset > 0 && (!found || c.At < o.Offset) {
			ok = false
		}
	})
	return ok
}
