package group_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/dirlock"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// produce sends one ping with hlc to each of devices, keyed by device.
func produce(t *testing.T, kc *kgo.Client, devices int, hlc uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for d := range devices {
		v, _ := proto.Marshal(&testpb.Ping{DeviceId: fmt.Sprint("d", d), Hlc: hlc})
		recs = append(recs, &kgo.Record{Topic: topicIn, Key: []byte(fmt.Sprint("d", d)), Value: v})
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// running is a processor run in the background.
type running struct {
	proc *group.Processor
	done chan error
	stop context.CancelFunc
}

func runInBackground(proc *group.Processor) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{proc: proc, done: make(chan error, 1), stop: cancel}
	go func() { r.done <- proc.Run(ctx) }()
	return r
}

// until waits for cond, failing if the processor's Run returns meanwhile.
func (r *running) until(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("%s: the processor's Run returned by itself: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v (ready: %v)", what, within, r.proc.Ready())
		}
	}
}

func (r *running) shutdown(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("processor did not stop")
	}
}

// TestBrokerRestartIsRiddenOut: the broker goes away and comes back on the
// same data directory and port. The processor's Run keeps running (on main it
// returned within ~2 s: "client has run out of available brokers"), Ready
// says why it is not ready meanwhile, and once the broker is back it
// processes again from where it was: every ping applied exactly once.
//
// With the record cache off, a ping whose offset was not committed when the
// broker went away is redelivered and recognised (not run again). With it on
// (the default), such a ping's state was never flushed either: it is dropped
// with the restart and run again on the state that never saw it, so the
// handler may run more than once per ping: one variant waits for the first
// pings' commit before stopping the broker, so each ping still runs once;
// the other stops it at once and checks that the table applied every ping
// once all the same.
func TestBrokerRestartIsRiddenOut(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	t.Run("cache off", func(t *testing.T) { testBrokerRestart(t, false, true) })
	t.Run("cache on", func(t *testing.T) { testBrokerRestart(t, true, true) })
	t.Run("cache on, broker gone before the flush", func(t *testing.T) { testBrokerRestart(t, true, false) })
}

// testBrokerRestart: commitFirst has the cache-on variant wait for the first
// pings' offset commit before the broker goes.
func testBrokerRestart(t *testing.T, cache, commitFirst bool) {
	bdir, port := t.TempDir(), freePort(t)
	start := func() *embedded.Broker {
		b, err := embedded.Start(embedded.DataDir(bdir), embedded.Port(port))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start()
	defer func() { b.Close() }()
	cl := cluster.Config{Brokers: b.Addrs()}
	kc, err := kgo.NewClient(kgo.SeedBrokers(cl.Brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	const devices = 20
	produce(t, kc, devices, 100)
	h := &counting{}
	stateDir := t.TempDir()
	opts := func() []group.Opt {
		o := []group.Opt{group.StateDir(stateDir), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond), group.Registerer(prometheus.NewRegistry())}
		if !cache {
			o = append(o, group.RecordCache(0))
		}
		return o
	}
	proc, err := validGroupOut(topo, h.handle).Processor(ctx, cl, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	r := runInBackground(proc)
	defer r.stop()
	r.until(t, "first pings", time.Minute, func() bool {
		return h.calls.Load() == devices && proc.Ready() == nil && (!cache || !commitFirst || committedSum(t, adm) == devices)
	})

	b.Close()
	var reason error
	r.until(t, "not ready while the broker is gone", time.Minute, func() bool {
		reason = proc.Ready()
		return reason != nil && strings.Contains(reason.Error(), "restarting after")
	})
	t.Logf("while the broker is gone: %v", reason)

	b = start()
	restarted := time.Now()
	produce(t, kc, devices, 200)
	r.until(t, "pings after the restart", 2*time.Minute, func() bool { return h.calls.Load() >= 2*devices && proc.Ready() == nil })
	t.Logf("broker restart to every new ping processed: %v", time.Since(restarted))
	r.shutdown(t)
	if !commitFirst {
		// Every ping once in the table, however often the handler ran. A
		// stop commits what its last flush wrote; inputs handled after it
		// (their writes dropped with their marks) are redelivered on the
		// next start, so the table is read once every input is committed.
		again, err := validGroupOut(topo, h.handle).Processor(ctx, cl, opts()...)
		if err != nil {
			t.Fatal(err)
		}
		runFor(t, again, "every ping committed", func() bool { return committedSum(t, adm) == 2*devices })
		last, _ := tableStates(t, cl, adm)
		for d := range devices {
			if st := last[fmt.Sprint("d", d)]; st.GetPings() != 2 || st.GetLastHlc() != 200 {
				t.Errorf("d%d: table state %v, want 2 pings, the last of HLC 200", d, st)
			}
		}
		return
	}
	if n := h.calls.Load(); n != 2*devices {
		t.Fatalf("handler called %d times, want %d", n, 2*devices)
	}
}

// TestStateDirIsLocked: while a processor runs, another on the same state
// directory is refused at once, naming the directory and the holder's pid;
// after the first stops, it starts.
func TestStateDirIsLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := startBroker(t, t.TempDir())
	stateDir := t.TempDir()
	first, err := build(t, b, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	r := runInBackground(first)
	defer r.stop()
	r.until(t, "first ready", time.Minute, func() bool { return first.Ready() == nil })
	_, err = build(t, b, stateDir)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), filepath.Join(stateDir, testGroup)) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second processor on a live state dir: %v, want ErrLocked naming the directory and pid", err)
	}
	r.shutdown(t)
	if _, err := build(t, b, stateDir); err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
}

// dumpTables reads every key and value of the group's Pebble tables under
// dir (the processor stopped), flushing them to SSTs first.
func dumpTables(t *testing.T, dir string) map[string]string {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(dir, testGroup, topicTab+".*.pebble"))
	if len(tables) == 0 {
		t.Fatal("no tables")
	}
	out := map[string]string{}
	for _, path := range tables {
		db, err := pebble.Open(path, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		it, _ := db.NewIter(nil)
		for it.First(); it.Valid(); it.Next() {
			if string(it.Key()) != "__offset" {
				out[string(it.Key())] = string(it.Value())
			}
		}
		if err := errors.Join(it.Close(), db.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDamagedStateIsRebuilt: garbage in every SST of the group's table. The
// processor reading it does not panic (on main: Pebble's fatal logger did, on
// every start); it restarts by itself, moves the tables it finds damaged
// aside (counted), rebuilds them from the changelog, and ends with the state
// it had before the damage plus the pings that came after it.
func TestDamagedStateIsRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := startBroker(t, t.TempDir())
	cl := cluster.Config{Brokers: b.Addrs()}
	kc, err := kgo.NewClient(kgo.SeedBrokers(cl.Brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	const devices = 2000
	produce(t, kc, devices, 100)
	stateDir := t.TempDir()
	h := &counting{}
	reg := prometheus.NewRegistry()
	newProc := func() *group.Processor {
		p, err := validGroupOut(topo, h.handle).Processor(ctx, cl, group.StateDir(stateDir), group.Storage(statestore.Pebble), group.RestartBackoff(50*time.Millisecond, 500*time.Millisecond), group.Registerer(reg))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := runInBackground(newProc())
	r.until(t, "first pings", 2*time.Minute, func() bool { return h.calls.Load() == devices })
	r.shutdown(t)
	before := dumpTables(t, stateDir)
	if len(before) != devices {
		t.Fatalf("%d keys stored, want %d", len(before), devices)
	}

	ssts, _ := filepath.Glob(filepath.Join(stateDir, testGroup, topicTab+".*.pebble", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no SSTs to damage")
	}
	for _, f := range ssts {
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fh.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", 16)), 40)
		_ = fh.Close()
	}

	produce(t, kc, devices, 200) // reading each device's state meets the damage
	proc := newProc()
	r = runInBackground(proc)
	started := time.Now()
	r.until(t, "pings after the damage", 2*time.Minute, func() bool { return h.calls.Load() == 2*devices && proc.Ready() == nil })
	t.Logf("damaged start to every ping applied on the rebuilt state: %v (%d keys)", time.Since(started), devices)
	r.shutdown(t)

	if n := counter(t, reg, "fencestream_state_damaged_total"); n < 1 {
		t.Fatalf("damaged tables counted: %v, want at least 1", n)
	}
	aside, _ := filepath.Glob(filepath.Join(stateDir, testGroup, topicTab+".*.pebble.damaged-*"))
	if len(aside) == 0 {
		t.Fatal("no damaged table kept for inspection")
	}
	after := dumpTables(t, stateDir)
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Fatalf("%s: missing after the rebuild", k)
		}
	}
	// The handler numbers each device's triggers by the ping count in its
	// state: a state not rebuilt (or rebuilt short) would number the new
	// ping's trigger 1 instead of 2.
	ids := map[string]bool{}
	embeddedtest.ConsumeUntil(t, cl, topicOut, func(recs []*kgo.Record) bool {
		for _, r := range recs {
			var tr testpb.Trigger
			if err := proto.Unmarshal(r.Value, &tr); err == nil {
				ids[tr.GetTriggerId()] = true
			}
		}
		return len(ids) >= 2*devices
	})
	for d := range devices {
		for _, n := range []int{1, 2} {
			if id := fmt.Sprintf("d%d|%d", d, n); !ids[id] {
				t.Fatalf("trigger %s missing: the rebuilt state is not the state before the damage", id)
			}
		}
	}
	if len(ids) != 2*devices {
		t.Fatalf("%d distinct triggers, want %d", len(ids), 2*devices)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestUnwritableStateStopsCleanly: the group's table directories stop taking
// new files while it runs. Ready is false from the first failed write, and Run
// ends by itself with ErrPermanent naming the directory and the fix, never a
// Go runtime fatal (on main: "sync: unlock of unlocked mutex" in Pebble's WAL
// rotation, seen in the statestore test).
func TestUnwritableStateStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	b := startBroker(t, t.TempDir())
	cl := cluster.Config{Brokers: b.Addrs()}
	kc, err := kgo.NewClient(kgo.SeedBrokers(cl.Brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	topo := testTopology(2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	h := &counting{}
	proc, err := validGroupOut(topo, h.handle).Processor(ctx, cl, group.StateDir(stateDir), group.Storage(statestore.Pebble), group.Registerer(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	r := runInBackground(proc)
	defer r.stop()
	produce(t, kc, 10, 100)
	r.until(t, "first pings", time.Minute, func() bool { return h.calls.Load() == 10 && proc.Ready() == nil })
	tables, _ := filepath.Glob(filepath.Join(stateDir, testGroup, topicTab+".*.pebble"))
	if len(tables) == 0 {
		t.Fatal("no tables")
	}
	for _, tbl := range tables {
		makeUnwritable(t, tbl)
	}
	var runErr error
	for hlc := uint64(200); ; hlc++ {
		produce(t, kc, 500, hlc) // ~50 KB of state writes per round, over the probe interval
		select {
		case runErr = <-r.done:
		case <-time.After(200 * time.Millisecond):
			if hlc > 260 {
				t.Fatalf("Run still going after %d rounds of writes to unwritable tables (ready: %v)", hlc-200, proc.Ready())
			}
			continue
		}
		break
	}
	if !errors.Is(runErr, group.ErrPermanent) || !errors.Is(runErr, statestore.ErrUnwritable) || !strings.Contains(runErr.Error(), filepath.Join(stateDir, testGroup)) || !strings.Contains(runErr.Error(), "make it writable") {
		t.Fatalf("Run = %v; want ErrPermanent wrapping ErrUnwritable, naming the directory and the fix", runErr)
	}
	if err := proc.Ready(); err == nil {
		t.Fatal("ready after the state directory failed")
	}
	t.Log(runErr)
}

// makeUnwritable makes dir refuse new files: chmod for a user, the immutable
// attribute for root (whom permissions do not bind).
func makeUnwritable(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("root, and chattr +i %s failed (%v: %s): cannot make a directory unwritable here", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}
