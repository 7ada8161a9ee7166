package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/dirlock"
)

// stateMarker is the file a group's state directory holds
// (processors/group/internal/statedir): reset deletes only directories that have it, or are empty, so
// a mistyped --state-dir cannot remove anything else.
const stateMarker = "fencestream-state.json"

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// errRefused is wrapped by every reason reset does nothing.
var errRefused = errors.New("reset refused")

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("reset", "reset --group G [--group G...] (--to-earliest | --to-time T) [--state-dir DIR...] --brokers B [--dry-run]",
		`The application reset tool (as Kafka Streams' kafka-streams-application-reset): makes a stopped
group reprocess its inputs from the start, or from a time, under its current settings. For each
group: refuses while it has active members; sets its committed offsets on its stream inputs to the
earliest offset (or the first at or after --to-time); deletes every record of its internal topics
(table changelog, loop, timers) up to their high watermarks and commits the loop and timer inputs
there; a topic one group writes across its ordering boundary for another (occupancy-changes, from
occupancy-members to occupancy) is internal to the two: they are reset together, and it is emptied
and committed at its end like a loop; deletes the group's local state, <state-dir>/<group>, under each --state-dir (it must be a group
state directory, holding fencestream-state.json, or empty or missing, and no process may hold its lock: a
paused instance is no member of its group, yet still has its state). Everything is checked before anything
changes. Outputs already written stay: downstream groups reprocessing them see both runs unless
they are reset too, and keep deduplicating by the (deterministic) ids.`)
	var kf kafkaFlags
	kf.register(c.fs)
	var groups, dirs listFlag
	c.fs.Var(&groups, "group", "group to reset (repeatable)")
	c.fs.Var(&dirs, "state-dir", "a --state-dir of the group's instances: <dir>/<group> is deleted (repeatable)")
	earliest := c.fs.Bool("to-earliest", false, "reprocess the inputs from their earliest offsets")
	toTime := c.fs.String("to-time", "", "reprocess from the first input record at or after this time (RFC 3339)")
	dryRun := c.fs.Bool("dry-run", false, "check and print the plan; change nothing")
	partitions := partitionsFlag(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if len(groups) == 0 {
		return c.usageErr(stderr, "--group is required")
	}
	var at time.Time
	switch {
	case *earliest == (*toTime != ""):
		return c.usageErr(stderr, "give exactly one of --to-earliest and --to-time")
	case *toTime != "":
		t, err := time.Parse(time.RFC3339Nano, *toTime)
		if err != nil {
			return c.usageErr(stderr, "--to-time: %v", err)
		}
		at = t
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	topo, err := modules.Topology(int32(*partitions))
	if err != nil {
		return c.fail(stderr, err)
	}
	var procs []topology.Processor
	for _, g := range groups {
		p, ok := topo.Processor(g)
		if !ok {
			var known []string
			for _, p := range topo.Processors {
				known = append(known, p.Group)
			}
			return c.usageErr(stderr, "unknown group %q (the topology's groups: %s)", g, strings.Join(known, ", "))
		}
		procs = append(procs, p)
	}
	paired := pairedEdges(topo)
	for _, e := range paired {
		if w, r := slices.Contains(groups, e.writer), slices.Contains(groups, e.reader); w != r {
			return c.usageErr(stderr, "group %s writes %s across its ordering boundary for group %s, which drops a record by its source offset: reset both (--group %s --group %s)",
				e.writer, e.topic, e.reader, e.writer, e.reader)
		}
	}
	_, adm, err := kf.connect(ctx)
	if err != nil {
		return c.fail(stderr, err)
	}
	defer adm.Close()
	plan, err := planReset(ctx, &kf, adm, procs, paired, dirs, at)
	defer plan.unlock()
	if err != nil {
		return c.fail(stderr, err)
	}
	plan.print(stdout)
	if *dryRun {
		fmt.Fprintln(stdout, "dry run: nothing changed")
		return exitOK
	}
	if err := plan.apply(ctx, &kf, adm); err != nil {
		return c.fail(stderr, err)
	}
	fmt.Fprintln(stdout, "reset done: start the groups to reprocess")
	return exitOK
}

// resetPlan is what reset will do, computed and checked before any change.
type resetPlan struct {
	groups   []string
	commits  map[string]kadm.Offsets // per group: inputs and internal inputs
	truncate kadm.Offsets            // internal topics: delete before these
	dirs     []string
	// locks holds every existing state directory of dirs from the check to
	// the removal: a process that has one (a paused instance is no member of
	// its group) refuses the reset, and none can take one meanwhile.
	locks []*dirlock.Lock
}

// unlock releases the state directories' locks; safe on nil.
func (p *resetPlan) unlock() {
	if p == nil {
		return
	}
	for _, l := range p.locks {
		_ = l.Release()
	}
	p.locks = nil
}

// pairedEdge is a topic one group writes across its declared ordering
// boundary for another group to stream: occupancy-changes, occupancy-members'
// count changes that occupancy adds up. The reader drops a record at or below
// the last source offset it applied, so it must not see the writer's records
// from before a reset next to those after: reset takes the two together and
// empties the topic like a loop.
type pairedEdge struct{ topic, writer, reader string }

func pairedEdges(topo *topology.Topology) []pairedEdge {
	var out []pairedEdge
	for _, b := range topo.Boundaries {
		for _, p := range topo.Processors {
			e := pairedEdge{topic: b.To, writer: b.Processor, reader: p.Group}
			// A writer may cross its boundary from several inputs (a
			// stream and its timers): one edge.
			if p.Group != b.Processor && slices.Contains(p.Streams, b.To) && !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	return out
}

// planReset checks everything and returns the plan; the plan (even with an
// error) holds locks its caller releases with unlock.
func planReset(ctx context.Context, kf *kafkaFlags, adm *kadm.Client, procs []topology.Processor, paired []pairedEdge, dirs []string, at time.Time) (*resetPlan, error) {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	plan := &resetPlan{commits: map[string]kadm.Offsets{}, truncate: kadm.Offsets{}}
	var names []string
	for _, p := range procs {
		names = append(names, p.Group)
	}
	described, err := adm.DescribeGroups(rctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describing groups: %w", err)
	}
	for _, p := range procs {
		d, ok := described[p.Group]
		if !ok {
			return nil, fmt.Errorf("group %s: not described by the broker", p.Group)
		}
		if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) { // never ran: nothing to stop
			return nil, fmt.Errorf("group %s: %w", p.Group, d.Err)
		}
		if len(d.Members) > 0 {
			return nil, fmt.Errorf("%w: group %s has %d active member(s) (state %s): stop every instance first", errRefused, p.Group, len(d.Members), d.State)
		}
		plan.groups = append(plan.groups, p.Group)
	}
	for _, dir := range dirs {
		for _, g := range plan.groups {
			// A processor keeps its state under <state-dir>/<group>.
			gdir := filepath.Join(dir, g)
			if err := checkResettableDir(gdir); err != nil {
				return plan, err
			}
			if err := plan.lock(gdir); err != nil {
				return plan, err
			}
			plan.dirs = append(plan.dirs, gdir)
		}
	}
	for _, p := range procs {
		var inputs, internal []string
		for _, t := range p.Streams {
			if slices.ContainsFunc(paired, func(e pairedEdge) bool { return e.topic == t && e.reader == p.Group }) {
				internal = append(internal, t) // emptied: its writer is reset too
			} else {
				inputs = append(inputs, t)
			}
		}
		for _, t := range []string{p.Loop, p.Timers} {
			if t != "" {
				internal = append(internal, t)
			}
		}
		commits := kadm.Offsets{}
		if len(inputs) > 0 { // kadm lists every topic when given none
			var starts kadm.ListedOffsets
			if at.IsZero() {
				starts, err = adm.ListStartOffsets(rctx, inputs...)
			} else {
				starts, err = adm.ListOffsetsAfterMilli(rctx, at.UnixMilli(), inputs...)
			}
			if err == nil {
				err = starts.Error()
			}
			if err != nil {
				return plan, fmt.Errorf("group %s: input offsets: %w", p.Group, err)
			}
			commits = starts.Offsets()
		}
		truncated := internal
		if p.Table != "" {
			truncated = append(truncated, p.Table)
		}
		if len(truncated) > 0 {
			ends, err := adm.ListEndOffsets(rctx, truncated...)
			if err == nil {
				err = ends.Error()
			}
			if err != nil {
				return plan, fmt.Errorf("group %s: internal topics: %w", p.Group, err)
			}
			ends.Each(func(o kadm.ListedOffset) {
				plan.truncate.AddOffset(o.Topic, o.Partition, o.Offset, -1)
				if slices.Contains(internal, o.Topic) {
					commits.AddOffset(o.Topic, o.Partition, o.Offset, -1)
				}
			})
		}
		plan.commits[p.Group] = commits
	}
	return plan, nil
}

// lock takes dir's lock when dir exists (a missing one is not created).
func (p *resetPlan) lock(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	l, err := dirlock.Acquire(dir)
	if errors.Is(err, dirlock.ErrLocked) {
		return fmt.Errorf("%w: a process still has its state (a stopped or paused instance is no member of its group, yet it holds the directory): %w", errRefused, err)
	}
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	p.locks = append(p.locks, l)
	return nil
}

// checkResettableDir refuses a directory that is not a group's state: it must
// be missing, empty, or hold the state marker.
func checkResettableDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("state directory %s: %w", dir, err)
	case !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() != dirlock.FileName }):
		return nil // empty but for a lock file
	}
	if _, err := os.Stat(filepath.Join(dir, stateMarker)); err != nil {
		return fmt.Errorf("%w: %s holds no %s, so it is not a group's state directory; nothing deleted", errRefused, dir, stateMarker)
	}
	return nil
}

func (p *resetPlan) print(w io.Writer) {
	for _, g := range p.groups {
		fmt.Fprintf(w, "group %s:\n", g)
		p.commits[g].Each(func(o kadm.Offset) {
			fmt.Fprintf(w, "  commit %s/%d at offset %d\n", o.Topic, o.Partition, o.At)
		})
	}
	p.truncate.Each(func(o kadm.Offset) {
		fmt.Fprintf(w, "  delete %s/%d before offset %d\n", o.Topic, o.Partition, o.At)
	})
	for _, d := range p.dirs {
		fmt.Fprintf(w, "  remove state directory %s\n", d)
	}
}

func (p *resetPlan) apply(ctx context.Context, kf *kafkaFlags, adm *kadm.Client) error {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	if len(p.truncate) > 0 {
		resp, err := adm.DeleteRecords(rctx, p.truncate)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("deleting internal records: %w", err)
		}
	}
	for _, g := range p.groups {
		resp, err := adm.CommitOffsets(rctx, g, p.commits[g])
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("group %s: committing offsets (an instance started meanwhile?): %w", g, err)
		}
	}
	for _, d := range p.dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	return nil
}
