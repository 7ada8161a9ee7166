package occupancy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// reorder is a broker fault: it holds some produce requests carrying topic
// until a later request for one of their partitions has been handled (or
// hold passes), then fails them, in turn with NOT_LEADER_FOR_PARTITION, with
// REQUEST_TIMED_OUT (both retriable) and by closing the connection (which
// fails every request in flight on it). The producer re-sends the held
// records — after the later ones, if it had a later one in flight for the
// same partition.
type reorder struct {
	kc    *kfake.Cluster
	topic string
	hold  time.Duration
	every int // hold every every-th request carrying topic
	// budget is how many requests are held in all: a record is failed at
	// most budget times, well within the ten retries Goka configures.
	budget int
	stop   chan struct{}

	mu        sync.Mutex
	requests  int            // requests carrying topic
	held      map[int32]bool // the held request's partitions of topic; nil when none is held
	overtaken chan struct{}  // closed by the first request to overtake the held one
	holds     int            // requests held so far, the current one included
	injected  int            // requests held and failed
	overtakes int            // requests handled while an earlier one for the same partition was held
}

var errDropConnection = errors.New("reorder fault: connection dropped")

func (f *reorder) control(kreq kmsg.Request) (kmsg.Response, error, bool) {
	req := kreq.(*kmsg.ProduceRequest)
	parts := map[int32]bool{}
	for _, t := range req.Topics {
		if t.Topic == f.topic {
			for _, p := range t.Partitions {
				parts[p.Partition] = true
			}
		}
	}
	if len(parts) == 0 {
		return nil, nil, false
	}
	f.mu.Lock()
	f.requests++
	if f.held != nil {
		for p := range parts {
			if f.held[p] {
				f.overtakes++
				if f.overtaken != nil {
					close(f.overtaken)
					f.overtaken = nil
				}
				break
			}
		}
		f.mu.Unlock()
		return nil, nil, false // handled now, before the held one
	}
	if f.holds >= f.budget || f.requests%f.every != 0 {
		f.mu.Unlock()
		return nil, nil, false
	}
	overtaken := make(chan struct{})
	f.held, f.overtaken = parts, overtaken
	kind := f.holds % 3
	f.holds++
	f.mu.Unlock()
	f.kc.SleepControl(func() {
		t := time.NewTimer(f.hold)
		defer t.Stop()
		select {
		case <-overtaken:
		case <-t.C: // an ordered producer sends nothing more meanwhile
		case <-f.stop:
		}
	})
	f.mu.Lock()
	f.held, f.overtaken = nil, nil
	f.injected++
	f.mu.Unlock()
	f.kc.KeepControl()
	switch kind {
	case 0:
		return embeddedtest.FailProduce(req, kerr.NotLeaderForPartition), nil, true
	case 1:
		return embeddedtest.FailProduce(req, kerr.RequestTimedOut), nil, true
	default:
		return nil, errDropConnection, true
	}
}

// counts are the fault's counters.
func (f *reorder) counts() (requests, holds, injected, overtakes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.holds, f.injected, f.overtakes
}

// faultPartitions is small so that two of occupancy-members' requests for one
// changes partition likely hold changes of one fence from one source partition.
const faultPartitions = 2

// reorderRun is what one run under the fault produced.
type reorderRun struct {
	sc                            *scenario // the triggers produced
	changes                       []*geofencepb.OccupancyChange
	distinct, want                int // distinct changes read, and how many the triggers flip
	requests, injected, overtakes int
	// replayed is each fence's record after applying the changes in the
	// order they sit on occupancy-changes, as the occupancy group does.
	replayed map[string]*geofencepb.Occupancy
}

// runUnderReorder runs both occupancy groups against a broker that holds and
// fails some of occupancy-members' produce requests, feeding triggers device
// chunk by device chunk until the fault has fired budget times.
func runUnderReorder(t *testing.T, opts ...occupancy.Opt) reorderRun {
	t.Helper()
	if testing.Short() {
		t.Skip("broker test")
	}
	b := embeddedtest.Start(t, embedded.SleepOutOfOrder())
	cl := cluster.Config{Brokers: b.Addrs()}
	topo := geofence.Topology(geofence.Partitions(faultPartitions))
	adm := kadm.NewClient(embeddedtest.Client(t, cl))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Ensure(ctx, adm); err != nil {
		t.Fatal(err)
	}
	f := &reorder{kc: b.Cluster(), topic: geofence.TopicOccupancyChanges, hold: 2 * time.Second, every: 3, budget: 3, stop: make(chan struct{})}
	b.Cluster().ControlKey(kmsg.Produce.Int16(), f.control)
	t.Cleanup(func() { close(f.stop) }) // before the broker closes

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 6))
	const chunk, chunks = 40, 12
	all := genScenario(r, "", chunk*chunks, 3, 12)
	proc := startOccupancy(t, cl, topo, t.TempDir(), opts...)
	defer proc.stop()
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicTriggers))

	out := reorderRun{sc: &scenario{fences: all.fences, byDevice: map[string][]*geofencepb.Trigger{}}}
	// A chunk at a time, the next as soon as the fault holds a request of
	// the last (or once it is all committed): the held request always has
	// later changes behind it, which a producer with requests to spare
	// sends while it waits.
	for c := 0; c < chunks; c++ {
		if _, holds, _, _ := f.counts(); holds >= f.budget {
			break
		}
		var trigs []*geofencepb.Trigger
		for _, dev := range all.devices[c*chunk : (c+1)*chunk] {
			out.sc.devices = append(out.sc.devices, dev)
			out.sc.byDevice[dev] = all.byDevice[dev]
			out.sc.all = append(out.sc.all, all.byDevice[dev]...)
			trigs = append(trigs, all.byDevice[dev]...)
		}
		_, before, _, _ := f.counts()
		produceTriggers(t, prod, trigs)
		waitFor(t, 60*time.Second, fmt.Sprintf("chunk %d held or consumed", c), func() (bool, string) {
			if _, holds, _, _ := f.counts(); holds > before {
				return true, ""
			}
			rep, err := occupancy.Lag(ctx, cl)
			if err != nil {
				return false, err.Error()
			}
			return rep.Total == 0, rep.String()
		})
	}
	// Lag alone does not say every change is written: a trigger's offset
	// may be committed past one whose changes are still being retried. So
	// wait for as many distinct changes as the triggers flip.
	out.want = expectedChanges(out.sc)
	clog := newChangeLog(t, cl)
	waitFor(t, 60*time.Second, "every change written and read, no request held, both groups caught up", func() (bool, string) {
		if n := clog.poll(ctx); n < out.want {
			return false, fmt.Sprintf("%d of %d changes", n, out.want)
		}
		if _, holds, injected, _ := f.counts(); holds != injected {
			return false, "a request is held"
		}
		rep, err := occupancy.Lag(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		return rep.Total == 0, rep.String()
	})
	out.requests, _, out.injected, out.overtakes = f.counts()
	t.Logf("%d devices, %d triggers; %d produce requests carried changes, %d held and failed, %d overtook a held one",
		len(out.sc.devices), len(out.sc.all), out.requests, out.injected, out.overtakes)
	if out.injected < f.budget {
		t.Fatalf("the fault fired %d times, want %d: too few produce requests (%d)", out.injected, f.budget, out.requests)
	}

	// The occupancy group read the same topic: its table must come to the
	// replay, whatever the replay says.
	counts, err := view.New[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, counts)
	waitFor(t, 30*time.Second, "occupancy-table equals the replay of occupancy-changes", func() (bool, string) {
		clog.poll(ctx) // a late re-send, if any, is in both
		out.changes, out.distinct = clog.changes, len(clog.distinct)
		out.replayed = replay(out.changes)
		for f, want := range out.replayed {
			got, err := counts.Get(f)
			if err != nil {
				return false, err.Error()
			}
			if !proto.Equal(got, want) {
				return false, fmt.Sprintf("fence %s: table %v, replay %v", f, got, want)
			}
		}
		return true, ""
	})
	var dropped uint64
	for _, occ := range out.replayed {
		dropped += occ.GetDuplicatesDropped()
	}
	t.Logf("%d changes on occupancy-changes (%d distinct, %d expected), %d of them dropped by the count as at or below its source_next",
		len(out.changes), out.distinct, out.want, dropped)
	return out
}

// expectedChanges is how many changes occupancy-members sends for sc's
// triggers: one per flip or DWELL, each device's triggers in order.
func expectedChanges(sc *scenario) int {
	n := 0
	for _, dev := range sc.devices {
		m := &geofencepb.DeviceMembership{DeviceId: dev}
		for _, tr := range sc.byDevice[dev] {
			if _, send, _ := occupancy.ApplyTrigger(m, tr, occupancy.Limits{}); send {
				n++
			}
		}
	}
	return n
}

// changeLog reads occupancy-changes from the start, each partition in order.
type changeLog struct {
	t        *testing.T
	c        *kgo.Client
	changes  []*geofencepb.OccupancyChange
	distinct map[string]bool // fence/source partition/source offset
}

func newChangeLog(t *testing.T, cl cluster.Config) *changeLog {
	return &changeLog{
		t:        t,
		c:        embeddedtest.Client(t, cl, kgo.ConsumeTopics(geofence.TopicOccupancyChanges), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
		distinct: map[string]bool{},
	}
}

// poll reads what one fetch returns within a moment and says how many
// distinct changes have been read.
func (l *changeLog) poll(ctx context.Context) int {
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	codec := codecs.For[geofencepb.OccupancyChange]()
	for _, r := range l.c.PollFetches(pctx).Records() {
		ch, err := codec.Unmarshal(r.Value)
		if err != nil {
			l.t.Fatal(err)
		}
		l.changes = append(l.changes, ch)
		l.distinct[fmt.Sprintf("%s/%d/%d", ch.GetFenceId(), ch.GetSourcePartition(), ch.GetSourceOffset())] = true
	}
	return len(l.distinct)
}

// replay applies changes to fresh fence records in their order, as the
// occupancy group does.
func replay(changes []*geofencepb.OccupancyChange) map[string]*geofencepb.Occupancy {
	out := map[string]*geofencepb.Occupancy{}
	for _, ch := range changes {
		occ := out[ch.GetFenceId()]
		if occ == nil {
			occ = &geofencepb.Occupancy{FenceId: ch.GetFenceId()}
			out[ch.GetFenceId()] = occ
		}
		occupancy.ApplyChange(occ, ch, occupancy.Limits{})
	}
	return out
}

// problems lists where changes, read from occupancy-changes in this order,
// break occupancy's guarantees for the triggers of sc: a change below a
// later one of its (fence, source partition) that is not a re-send of one
// already there (a re-send — a request the broker appended but whose answer
// was lost with the connection — is fine, and must be what the count drops),
// and counts other than the triggers' ground truth or than enters - exits.
func problems(sc *scenario, changes []*geofencepb.OccupancyChange) []string {
	var out []string
	type source struct {
		fence string
		part  int32
	}
	last := map[source]int64{}
	seen := map[source]map[int64]bool{}
	resent := map[string]uint64{}
	for _, ch := range changes {
		k := source{ch.GetFenceId(), ch.GetSourcePartition()}
		off := ch.GetSourceOffset()
		if seen[k] == nil {
			seen[k] = map[int64]bool{}
		}
		switch prev, ok := last[k]; {
		case seen[k][off]:
			resent[k.fence]++
		case ok && off < prev:
			out = append(out, fmt.Sprintf("fence %s source partition %d: offset %d after %d on occupancy-changes", k.fence, k.part, off, prev))
		}
		seen[k][off] = true
		last[k] = max(last[k], off)
	}
	replayed := replay(changes)
	for f, want := range sc.truth() {
		occ := replayed[f]
		if got := occ.GetCount(); got != int64(len(want)) {
			out = append(out, fmt.Sprintf("fence %s: count %d, but %d devices' last trigger says inside", f, got, len(want)))
		}
		if d := occ.GetDuplicatesDropped(); d != resent[f] {
			out = append(out, fmt.Sprintf("fence %s: %d changes dropped as duplicates, %d were re-sent", f, d, resent[f]))
		}
		if int64(occ.GetEntersTotal())-int64(occ.GetExitsTotal()) != occ.GetCount() {
			out = append(out, fmt.Sprintf("fence %s: enters %d - exits %d != count %d", f, occ.GetEntersTotal(), occ.GetExitsTotal(), occ.GetCount()))
		}
	}
	return out
}

// overtaken is changes with the first flip that has a later change of its
// (fence, source partition) moved behind that change: what a retried request
// landing after a later one writes.
func overtaken(changes []*geofencepb.OccupancyChange) ([]*geofencepb.OccupancyChange, bool) {
	for i, a := range changes {
		if a.GetDelta() == 0 {
			continue
		}
		for j := i + 1; j < len(changes); j++ {
			b := changes[j]
			if b.GetFenceId() == a.GetFenceId() && b.GetSourcePartition() == a.GetSourcePartition() && b.GetSourceOffset() > a.GetSourceOffset() {
				out := slices.Clone(changes)
				out[i], out[j] = b, a
				return out, true
			}
		}
	}
	return nil, false
}

// TestOccupancyCountsExactUnderProduceRetries: the broker holds some of
// occupancy-members' produce requests until a later one could overtake them
// and then fails them (retriable errors, a dropped connection), while
// triggers for hundreds of devices over three fences flow through the real
// groups. No request for a partition overtakes a held one, so every (fence,
// source partition)'s changes sit on occupancy-changes in source-offset
// order, the count stage drops exactly the re-sent ones, and each fence
// counts exactly the devices whose last trigger says inside.
//
// Two things keep one partition's requests in order, and each subtest leaves
// one of them: group.OrderedOutputs (one request in flight), and, since
// sarama 1.48, sarama's own partition muting (no second batch for a
// partition while one is in flight, whatever MaxOpenRequests). "unordered"
// runs occupancy-members without OrderedOutputs and passes on sarama's
// muting alone; if it fails while "ordered" passes, sarama lost its muting
// and OrderedOutputs is what holds the counts.
func TestOccupancyCountsExactUnderProduceRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []occupancy.Opt
	}{
		{"ordered", nil},
		{"unordered", []occupancy.Opt{occupancy.WithUnorderedOutputs()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runUnderReorder(t, tc.opts...)
			if run.overtakes != 0 {
				t.Errorf("%d produce requests for occupancy-changes overtook a held one for the same partition", run.overtakes)
			}
			if run.distinct != run.want {
				t.Errorf("%d distinct changes on occupancy-changes, the triggers flip %d", run.distinct, run.want)
			}
			for _, p := range problems(run.sc, run.changes) {
				t.Error(p)
			}
			// The checks catch what an overtaking request would write.
			bad, ok := overtaken(run.changes)
			if !ok {
				t.Fatal("no two flips of one fence from one source partition: the run cannot show a reorder")
			}
			if len(problems(run.sc, bad)) == 0 {
				t.Error("a flip moved behind a later change of its source partition went unnoticed")
			}
		})
	}
}

func produceTriggers(t *testing.T, prod *kgo.Client, trigs []*geofencepb.Trigger) {
	t.Helper()
	codec := codecs.For[geofencepb.Trigger]()
	recs := make([]*kgo.Record, 0, len(trigs))
	for _, tr := range trigs {
		v, err := codec.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(tr.DeviceId), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
