//go:build unix

// Package chaostest holds the multi-process chaos test of the geofencing
// pipeline: the embedded broker, debouncers and occupancy processes (each
// running both occupancy groups) run as real OS processes (the binaries of
// ./cmd), a simulated fleet with ground truth feeds them, and processors are
// killed with SIGKILL and restarted while triggers flow. When everything has
// caught up, the tables, the trigger stream and the truth must agree. It has
// test files only.
package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/produce"
)

// The shape of a run. The fleet's 20 minutes of event time are played in 90 s
// of wall time: ~140,000 pings and ~1,200 true transitions, so triggers are
// flowing whenever a kill lands.
const (
	seedEnv = "FENCESTREAM_CHAOS_SEED"
	// Where the children's logs are kept, in chaos-<seed>/ (as .ci/run sets
	// it); by default they are removed with the test's temporary directories.
	artifactsEnv = "FENCESTREAM_ARTIFACTS"

	debouncers = 3
	occupancys = 2
	kills      = 12
	// Of the kill slots: these kill -9 the broker (restarted on its data
	// directory and port) instead of a processor, and this one kills
	// debouncer-1 and damages its local state before restarting it.
	damageSlot = 5

	moving   = 200
	parked   = 30
	interval = 2 * time.Second
	span     = 20 * time.Minute
	wall     = 90 * time.Second // the fleet's wall time: 20 min of event time at 13.3x
	// Time a device stays clearly on one side between two crossings of a
	// fence and after its last one: above the longest min dwell of the demo
	// fences (60 s, the depots and markets), so every true transition can be
	// confirmed before the next one or the end (the fleet's 60 s default
	// cannot, for those fences).
	minGap = 90 * time.Second

	// Far above the fleet's span, so the wall-clock silence sweep never closes
	// a stay: every trigger comes from a ping, and the truth predicts it.
	silenceTimeout = 2 * time.Hour

	readyTimeout   = 90 * time.Second
	catchUpTimeout = 2 * time.Minute
)

// TestChaos runs the pipeline as processes and kills them while a fleet with
// ground truth drives through the demo fences. See the package doc.
//
// Replay a run: FENCESTREAM_CHAOS_SEED=<seed from the log> go test ./cmd/chaostest -run TestChaos -v
// (the seed fixes the fleet, the kill moments and the victims; the processes'
// timing still varies).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process chaos test (about two minutes)")
	}
	began := time.Now()
	seed := time.Now().UnixNano()
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6368616f73)) // "chaos"

	logDir := ""
	if dir := os.Getenv(artifactsEnv); dir != "" {
		logDir = filepath.Join(dir, "chaos-"+strconv.FormatInt(seed, 10))
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("children's logs kept in %s", logDir)
	}
	bin := t.TempDir()
	buildBinaries(t, bin)
	fencectl := filepath.Join(bin, "fencectl")
	data := t.TempDir()

	// The broker first: its cleanup (registered first) runs last. A fixed
	// port, so a restarted broker is where the clients left it.
	broker := newProc(t, logDir, "broker", fencectl, true, "broker", "--data", filepath.Join(data, "broker"), "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	if err := broker.start(); err != nil {
		t.Fatal(err)
	}
	if err := broker.waitReady(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, broker.tail(30))
	}
	addr := broker.firstStdoutLine()
	cl := cluster.Config{Brokers: []string{addr}}
	t.Logf("broker at %s", addr)
	runOnce(t, time.Minute, fencectl, "topology", "check", "--create", "--brokers", addr)
	runOnce(t, time.Minute, fencectl, "fences", "load", "--demo", "--brokers", addr)

	var procs []*proc
	for i := 1; i <= debouncers; i++ {
		args := []string{"--brokers", addr, "--state-dir", filepath.Join(data, fmt.Sprintf("debouncer-%d", i)),
			"--metrics-addr", "", "--log-level", "debug", "--silence-timeout", silenceTimeout.String()}
		if i == 2 {
			args = append(args, "--hot-standby", "--recover-ahead")
		}
		procs = append(procs, newProc(t, logDir, fmt.Sprintf("debouncer-%d", i), filepath.Join(bin, "debouncer"), false, args...))
	}
	for i := 1; i <= occupancys; i++ {
		args := []string{"--brokers", addr, "--state-dir", filepath.Join(data, fmt.Sprintf("occupancy-%d", i)), "--metrics-addr", "", "--log-level", "debug"}
		if i == 2 {
			args = append(args, "--hot-standby")
		}
		procs = append(procs, newProc(t, logDir, fmt.Sprintf("occupancy-%d", i), filepath.Join(bin, "occupancy"), false, args...))
	}
	// Registered after the procs: runs before their cleanups kill them.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range append([]*proc{broker}, procs...) {
			t.Logf("----- tail of %s (%d runs; full log %s)\n%s", p.name, p.runs, p.log, p.tail(25))
		}
	})
	for _, p := range procs {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		p.setSupervised(true)
	}
	kc, adm, err := admin(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	// An occupancy process is a member of both occupancy groups.
	groups := []*procGroup{
		{name: geofence.GroupDebouncer, procs: procs[:debouncers], adm: adm},
		{name: geofence.GroupOccupancyMembers, procs: procs[debouncers:], adm: adm},
		{name: geofence.GroupOccupancy, procs: procs[debouncers:], adm: adm},
	}
	for _, p := range procs {
		gs := groupsOf(groups, p)
		p.beforeRestart = func() {
			for _, g := range gs {
				g.mark()
			}
		}
	}
	for _, g := range groups {
		if err := g.waitSettled(readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d processes up (all %d groups stable) after %v", len(procs), len(groups), time.Since(began).Round(time.Millisecond))

	// The fleet: event time ends about now, as a live fleet's would.
	cat := fences.New()
	if err := cat.Apply(1, fences.Demo(), nil); err != nil {
		t.Fatal(err)
	}
	snap := cat.Snapshot()
	sim, err := fleet.New(fleet.Config{
		Seed: seed, Moving: moving, Parked: parked, NoiseSigmaM: 5, MinGap: minGap,
		Interval: interval, Duration: span, Start: time.Now().Add(-span).Truncate(time.Millisecond), Pace: float64(span) / float64(wall),
	}, snap.All())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sim.Truth().Transitions); n < 200 {
		t.Fatalf("the fleet has only %d true transitions: it would not exercise the pipeline", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleetDone := make(chan error, 1)
	var sent int
	go func() { fleetDone <- produceFleet(ctx, cl, sim, &sent) }()
	fleetStart := time.Now()
	t.Logf("fleet: %d moving + %d parked devices, %d pings over %v of event time in ~%v; %d true transitions",
		moving, parked, sim.Ticks()*(moving+parked), span, wall, len(sim.Truth().Transitions))

	// Kills at random moments of the busy period, one in each of `kills`
	// slots, of a process whose groups are all settled (see procGroup: a
	// kill during a rebalance has nothing in flight, and a kill during a
	// first join trips kfake). When no process is, the kill waits for one.
	// Then one rolling restart of the debouncers and of the occupancy
	// processes, both at once.
	slot := time.Duration(float64(wall) * 0.8 / kills)
	var oversized map[string][]grouptest.Oversized
	for i := range kills {
		if i == oversizeSlot {
			oversized = produceOversized(t, cl)
		}
		at := time.Duration(float64(wall)*0.05) + time.Duration((float64(i)+0.2+0.6*rng.Float64())*float64(slot))
		select {
		case err := <-fleetDone:
			t.Fatalf("the fleet stopped early: %v", err)
		case <-time.After(time.Until(fleetStart.Add(at))):
		}
		if brokerSlots[i] {
			// Processors, the fleet's producer and this test's clients ride it
			// out: none of them is restarted for it.
			killed := time.Since(fleetStart)
			// Down for a while: long enough that every client meets refused
			// connections, not just one reset.
			if err := broker.kill9Then(func() error { time.Sleep(brokerDown); return nil }); err != nil {
				t.Fatal(err)
			}
			if err := broker.waitReady(30 * time.Second); err != nil {
				t.Fatalf("broker restart: %v\n%s", err, broker.tail(30))
			}
			back := time.Now()
			resumed, err := waitProcessing(adm, groups, 2*readyTimeout)
			if err != nil {
				t.Fatalf("after the broker restart: %v", err)
			}
			t.Logf("kill -9 #%d: the broker at %v of the fleet, down %v, restarted as run %d on its data directory; every group committed new offsets %v after it was back (%s)",
				i+1, killed.Round(time.Millisecond), brokerDown, broker.runs, time.Since(back).Round(time.Millisecond), resumed)
			continue
		}
		if i == damageSlot {
			p := procs[0]
			if err := groups[0].waitSettled(readyTimeout); err != nil {
				t.Fatal(err)
			}
			var damaged []string
			if err := p.kill9Then(func() (err error) { damaged, err = damageState(p.stateDir()); return err }); err != nil {
				t.Fatal(err)
			}
			t.Logf("kill -9 #%d: %s at %v of the fleet, its local state damaged (%d tables), restarted as run %d",
				i+1, p.name, time.Since(fleetStart).Round(time.Millisecond), len(damaged), p.runs)
			continue
		}
		up, waited := settledProcs(t, groups)
		p := up[rng.IntN(len(up))]
		if err := p.kill9(); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill -9 #%d: %s at %v of the fleet (%d of %d processors settled; waited %v), restarted as run %d",
			i+1, p.name, time.Since(fleetStart).Round(time.Millisecond), len(up), len(procs), waited.Round(time.Millisecond), p.runs)
	}
	t.Logf("rolling restart from %v of the fleet", time.Since(fleetStart).Round(time.Millisecond))
	var rolling sync.WaitGroup
	for _, set := range [][]*proc{procs[:debouncers], procs[debouncers:]} {
		gs := groupsOf(groups, set[0])
		rolling.Go(func() {
			for _, p := range set {
				if err := waitSettled(gs, readyTimeout); err != nil {
					t.Errorf("before the rolling restart of %s: %v", p.name, err)
					return
				}
				if err := p.restart(30 * time.Second); err != nil {
					t.Errorf("rolling restart: %v\n%s", err, p.tail(30))
				}
			}
			if err := waitSettled(gs, readyTimeout); err != nil {
				t.Errorf("after the rolling restart: %v", err)
			}
		})
	}
	rolling.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("rolling restart done at %v of the fleet", time.Since(fleetStart).Round(time.Millisecond))
	if err := <-fleetDone; err != nil {
		t.Fatalf("fleet: %v", err)
	}
	t.Logf("fleet done: %d pings acknowledged in %v", sent, time.Since(fleetStart).Round(time.Millisecond))

	cctx, ccancel := context.WithTimeout(ctx, catchUpTimeout)
	defer ccancel()
	caughtUp := time.Now()
	if err := waitCaughtUp(cctx, cl); err != nil {
		t.Fatalf("the pipeline did not catch up within %v: %v", catchUpTimeout, err)
	}
	t.Logf("caught up %v after the fleet ended", time.Since(caughtUp).Round(time.Millisecond))

	// Views are started only now: their recovery reads each table to its end.
	devView, err := view.New[geofencepb.DeviceState](cl, geofence.TopicDebouncer)
	if err != nil {
		t.Fatal(err)
	}
	memView, err := view.New[geofencepb.DeviceMembership](cl, geofence.TopicOccupancyMembers)
	if err != nil {
		t.Fatal(err)
	}
	occView, err := view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, devView)
	grouptest.RunView(t, memView)
	grouptest.RunView(t, occView)
	trig, err := readTriggers(cctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	states, err := readStates(devView)
	if err != nil {
		t.Fatal(err)
	}
	members, err := readTable(memView)
	if err != nil {
		t.Fatal(err)
	}
	occs, err := readTable(occView)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{sim: sim, snap: snap, trig: trig, states: states, members: members, occs: occs}
	check(t, w)
	checkOversized(t, cl, oversized, procs)

	// Every exit of a processor is one the test caused: none stops on its
	// own, broker restarts and damaged state included.
	for _, p := range procs {
		if c := p.crashLog(); len(c) > 0 {
			t.Errorf("%s exited on its own %d time(s) (and was restarted): %s\n%s", p.name, len(c), strings.Join(c, "; "), p.tail(40))
		}
	}
	if n := countLines(procs[0].log, "local state damaged: moved aside"); n == 0 {
		t.Errorf("%s never moved its damaged state aside", procs[0].name)
	}
	if t.Failed() {
		t.FailNow()
	}
	recreateTriggersStep(t, fencectl, cl, adm, procs, groups, w)

	// A clean stop of everything: processors first, then the broker.
	var stop sync.WaitGroup
	for _, p := range procs {
		stop.Go(func() {
			if err := p.stop(30 * time.Second); err != nil {
				t.Errorf("final stop: %v", err)
			}
		})
	}
	stop.Wait()
	if err := broker.stop(30 * time.Second); err != nil {
		t.Errorf("final stop: %v", err)
	}
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

// brokerSlots are the kill slots that kill the broker; it stays down for
// brokerDown.
var brokerSlots = map[int]bool{2: true, 8: true}

const brokerDown = 3 * time.Second

// waitProcessing waits until every group has committed offsets beyond those
// it had when called (the broker is back: it answers), and says how far each
// got.
func waitProcessing(adm *kadm.Client, groups []*procGroup, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	committed := func(g string) (int64, error) {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		offs, err := adm.FetchOffsets(cctx, g)
		if err != nil {
			return 0, err
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n, nil
	}
	base := map[string]int64{}
	var report []string
	for _, g := range groups {
		for {
			n, err := committed(g.name)
			if err == nil {
				base[g.name] = n
				break
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("group %s: committed offsets unreadable: %w", g.name, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, g := range groups {
		for {
			n, err := committed(g.name)
			if err == nil && n > base[g.name] {
				report = append(report, fmt.Sprintf("%s +%d", g.name, n-base[g.name]))
				break
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("group %s committed nothing new within %v", g.name, timeout)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return strings.Join(report, ", "), nil
}

// damageState writes garbage over the MANIFEST of every Pebble table under
// dir, so none of them can be opened, and returns the tables.
func damageState(dir string) ([]string, error) {
	tables, err := filepath.Glob(filepath.Join(dir, "*", "*.pebble"))
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("no Pebble tables under %s to damage", dir)
	}
	for _, tbl := range tables {
		ms, _ := filepath.Glob(filepath.Join(tbl, "MANIFEST-*"))
		for _, m := range ms {
			if err := os.WriteFile(m, []byte(strings.Repeat("\xde\xad\xbe\xef", 16)), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return tables, nil
}

func countLines(path, substr string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), substr)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// groupsOf is the groups p is a member of.
func groupsOf(groups []*procGroup, p *proc) []*procGroup {
	var out []*procGroup
	for _, g := range groups {
		if slices.Contains(g.procs, p) {
			out = append(out, g)
		}
	}
	return out
}

// waitSettled waits until every group of gs is settled at once.
func waitSettled(gs []*procGroup, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var err error
		for _, g := range gs {
			if err = g.waitSettled(time.Until(deadline)); err != nil {
				return err
			}
		}
		if allSettled(gs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("groups not settled together within %v", timeout)
		}
	}
}

// allSettled says whether every group of gs is settled now.
func allSettled(gs []*procGroup) bool {
	for _, g := range gs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ok, _ := g.settled(ctx)
		cancel()
		if !ok {
			return false
		}
	}
	return true
}

// settledProcs waits until some process has all its groups settled and
// returns those processes and how long it waited.
func settledProcs(t *testing.T, groups []*procGroup) ([]*proc, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		ok := map[*procGroup]bool{}
		var state []string
		for _, g := range groups {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			settled, s := g.settled(ctx)
			cancel()
			ok[g] = settled
			state = append(state, g.name+": "+s)
		}
		var up []*proc
		seen := map[*proc]bool{}
		for _, g := range groups {
			for _, p := range g.procs {
				if seen[p] {
					continue
				}
				seen[p] = true
				all := true
				for _, pg := range groupsOf(groups, p) {
					all = all && ok[pg]
				}
				if all {
					up = append(up, p)
				}
			}
		}
		if len(up) > 0 {
			return up, time.Since(start)
		}
		if time.Since(start) > readyTimeout {
			t.Fatalf("no group settled within %v: %s", readyTimeout, strings.Join(state, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// produceFleet sends every ping of sim through the key-discipline producer
// (which stamps the HLC), paced by sim, and waits for every acknowledgement.
func produceFleet(ctx context.Context, cl cluster.Config, sim *fleet.Sim, sent *int) error {
	topo := geofence.Topology()
	prod, err := produce.New[geofencepb.Ping](cl, topo.MustTopic(geofence.TopicPings))
	if err != nil {
		return err
	}
	waits := make(chan func() error, 8192)
	errc := make(chan error, 1)
	go func() {
		var first error
		for w := range waits {
			if err := w(); err != nil && first == nil {
				first = err
			}
			*sent++
		}
		errc <- first
	}()
	var emitErr error
	err = sim.Stream(ctx, func(p *geofencepb.Ping) bool {
		w, err := prod.EmitAsync(p.GetDeviceId(), p)
		if err != nil {
			emitErr = err
			return false
		}
		waits <- w
		return true
	})
	close(waits)
	werr := <-errc
	cerr := prod.Close()
	return errors.Join(err, emitErr, werr, cerr)
}
