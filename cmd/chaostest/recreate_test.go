//go:build unix

package chaostest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
)

// recreateTriggersStep deletes and recreates the triggers topic under the
// running pipeline, after it has caught up and been checked. Every
// debouncer (which writes it) and occupancy process (which reads it) must
// detect the new topic id and stop on its own, saying which topic changed;
// then the operator's decision is scripted: fencectl reset of the three
// groups to the earliest offsets with every state directory, a restart, and
// the pipeline, rebuilt from the pings, must agree with the truth again:
// nothing from the old topic applied to the new one, nothing lost.
func recreateTriggersStep(t *testing.T, fencectl string, cl cluster.Config, adm *kadm.Client, procs []*proc, groups []*procGroup, w *world) {
	t.Helper()
	began := time.Now()
	for _, p := range procs {
		p.setSupervised(false) // each stops on its own, and is not restarted until the reset
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, geofence.TopicTriggers); err != nil {
		t.Fatal(err)
	}
	runOnce(t, time.Minute, fencectl, "topology", "check", "--create", "--brokers", cl.Brokers[0])
	for _, p := range procs {
		_, done, _ := p.current()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s still running 2 min after %s was recreated\n%s", p.name, geofence.TopicTriggers, p.tail(30))
		}
		data, _ := os.ReadFile(p.log)
		if !strings.Contains(string(data), "topic "+geofence.TopicTriggers+" was recreated") && !strings.Contains(string(data), "topic "+geofence.TopicTriggers+" (id ") {
			t.Fatalf("%s stopped without saying %s changed:\n%s", p.name, geofence.TopicTriggers, p.tail(30))
		}
	}
	t.Logf("recreated %s: every processor stopped on its own within %v, naming the topic", geofence.TopicTriggers, time.Since(began).Round(time.Millisecond))

	args := []string{"reset", "--to-earliest", "--brokers", cl.Brokers[0],
		"--group", geofence.GroupDebouncer, "--group", geofence.GroupOccupancyMembers, "--group", geofence.GroupOccupancy}
	for _, p := range procs {
		args = append(args, "--state-dir", p.stateDir())
	}
	// Members of the stopped groups may take a moment to be gone.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := runFencectl(ctx, fencectl, args...)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fencectl reset: %v\n%s", err, out)
		}
		time.Sleep(time.Second)
	}
	for _, p := range procs {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		p.setSupervised(true)
	}
	for _, g := range groups {
		if err := g.waitSettled(readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, catchUpTimeout)
	defer ccancel()
	if err := waitCaughtUp(cctx, cl); err != nil {
		t.Fatalf("after the reset the pipeline did not catch up within %v: %v", catchUpTimeout, err)
	}
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
	after := &world{sim: w.sim, snap: w.snap}
	if after.trig, err = readTriggers(cctx, cl); err != nil {
		t.Fatal(err)
	}
	if after.states, err = readStates(devView); err != nil {
		t.Fatal(err)
	}
	if after.members, err = readTable(memView); err != nil {
		t.Fatal(err)
	}
	if after.occs, err = readTable(occView); err != nil {
		t.Fatal(err)
	}
	check(t, after)
	t.Logf("after the reset: rebuilt from the pings and checked against the truth in %v (%d triggers on the new topic)", time.Since(began).Round(time.Millisecond), len(after.trig))
}

// runFencectl runs fencectl once and returns its output (an error, not a
// failed test, when it fails: the caller may try again).
func runFencectl(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	return string(out), nil
}
